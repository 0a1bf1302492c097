/* cmd_doctor.c: `strata doctor`: what this machine offers strata (kernel, KVM, written-page mechanism, FUSE), and why not. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cli.h"
#include "vmm/vmm.h"

static void usage(void)
{
	printf("usage: strata doctor [--need kvm]\n\n"
	       "Says what this machine offers strata, one line each: the kernel, KVM (or\n"
	       "why it cannot be used and what to do), how written guest pages are found\n"
	       "(pagemap-scan on Linux 6.7+, else pagemap-read), FUSE, and the reset\n"
	       "policy in force, and who can read the store (a warning when others can).\n"
	       "Exits 1 if something strata needs is missing.\n\n"
	       "  --need kvm   check only KVM: if sandboxes can run on it, say so and exit 0;\n"
	       "               else print the reason on one line and exit 1 (for scripts)\n");
}

/* Who can read the store: its directories only (fsck walks every file).
 * A warning, never a failure: nothing strata needs is missing. */
static void doctor_store(const struct cli *cli)
{
	struct st_store *s;
	gid_t g;
	long long n;

	if (st_store_open(cli->store, ST_OPEN_RDONLY, &s) < 0) {
		printf("store:         none at %s ('strata init' makes one)\n", cli_esc(cli->store));
		return;
	}
	if ((n = cli_store_exposed(cli, s, ST_PERM_CHECK_DIRS)) == 0) {
		if (st_store_shared(s, &g))
			printf("store:         %s, readable by group %lu only\n", cli_esc(st_store_path(s)), (unsigned long)g);
		else
			printf("store:         %s, readable by its owner only\n", cli_esc(st_store_path(s)));
	} else if (n > 0) {
		printf("store:         %s: other users can read it (the lines above; 'strata fsck' lists every path)\n",
		       cli_esc(st_store_path(s)));
	}
	st_store_close(s);
}

int cmd_doctor(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "need", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct vmm_error kerr, derr;
	struct utsname u;
	const char *need = NULL;
	char policy[512];
	int c, status = CLI_OK;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': need = optarg; break;
		case 'h': usage(); return CLI_OK;
		default: return cli_usage_hint(argv[0]);
		}
	}
	if (optind < argc || (need && strcmp(need, "kvm") != 0)) {
		cli_err(cli, "doctor: expected no arguments, or --need kvm");
		return CLI_USAGE;
	}
	int krc = vmm_kvm_check(&kerr);
	if (need) {
		if (krc == 0) {
			printf("KVM runs sandboxes here\n");
			return CLI_OK;
		}
		printf("%s\n", kerr.message);
		return CLI_FAIL;
	}
	if (uname(&u) == 0)
		printf("kernel:        Linux %s (strata supports %d.%d and newer)\n", u.release,
		       VMM_KERNEL_MIN_MAJOR, VMM_KERNEL_MIN_MINOR);
	if (krc == 0) {
		printf("kvm:           usable (/dev/kvm)\n");
	} else {
		printf("kvm:           unusable: %s\n", kerr.message);
		status = CLI_FAIL;
	}
	enum vmm_dirty_mech mech;
	if (vmm_dirty_mechanism(&mech, &derr) == 0) {
		printf("written pages: %s%s\n", vmm_dirty_name(mech),
		       mech == VMM_DIRTY_SCAN ? " (PAGEMAP_SCAN)" : " (reading pagemap entries)");
	} else {
		printf("written pages: none works: %s\n", derr.message);
		status = CLI_FAIL;
	}
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		printf("fuse:          usable (/dev/fuse)\n");
	} else {
		printf("fuse:          unusable: /dev/fuse: %s (mounts need it; nothing else does)\n", strerror(errno));
	}
	struct vmm_policy pol;
	char why[4300];
	if (cli_policy_load(&pol, why, sizeof(why)) < 0) {
		printf("policy:        unusable: %s (sandboxes refuse to start; 'strata calibrate' writes a new one)\n",
		       why);
		status = CLI_FAIL;
	} else {
		vmm_policy_describe(&pol, policy, sizeof(policy));
		printf("policy:        %s\n", policy);
	}
	doctor_store(cli);
	return status;
}
