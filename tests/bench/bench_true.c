/* bench_true.c: a C program linked only against libc that does nothing, the floor of a process's own start (bench_start.c). */
int main(void)
{
	return 0;
}
