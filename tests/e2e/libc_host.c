/* libc_host.c: the host's C library answering what tests/e2e/libc.sh asks the libc guest (glibc's printf, strtod and libm). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Distance in units in the last place between two finite doubles of one sign. */
static uint64_t ulps(double a, double b)
{
	int64_t x, y;

	memcpy(&x, &a, sizeof x);
	memcpy(&y, &b, sizeof y);
	return x > y ? (uint64_t)(x - y) : (uint64_t)(y - x);
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "fmt") == 0) {
		printf(argv[2], strtod(argv[3], NULL));
		return 0;
	}
	if (argc == 5 && strcmp(argv[1], "math") == 0) {
		static const struct { const char *name; double (*f)(double); } fns[] = {
			{ "sin", sin }, { "cos", cos }, { "tan", tan }, { "exp", exp }, { "log", log },
			{ "log10", log10 }, { "sqrt", sqrt }, { "atan", atan }, { "cbrt", cbrt },
			{ "floor", floor }, { "ceil", ceil }, { "tanh", tanh }, { "erf", erf },
		};
		double x = strtod(argv[3], NULL), guest = strtod(argv[4], NULL);
		for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
			if (strcmp(fns[i].name, argv[2]) == 0) {
				double want = fns[i].f(x);
				/* Neither libm rounds every function correctly: musl's
				 * cbrt and glibc's differ by 2 ulp at some points. */
				if (ulps(want, guest) <= 2)
					return puts("agree"), 0;
				printf("%s(%s): host %.17g, guest %s\n", argv[2], argv[3], want, argv[4]);
				return 1;
			}
	}
	fprintf(stderr, "usage: libc_host fmt FORMAT NUMBER | math NAME X GUEST_RESULT\n");
	return 2;
}
