/* kvm.c: the KVM boundary: the only file that opens /dev/kvm or issues KVM ioctls. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "store/sys.h"
#include "vmm/vmm_int.h"

/* Not in every kernel header yet (Linux 6.13+); the value is ABI. */
#ifndef KVM_X86_QUIRK_SLOT_ZAP_ALL
#define KVM_X86_QUIRK_SLOT_ZAP_ALL (1 << 7)
#endif

static int sys_fd = -1;
static int sys_run_size;
static struct vmm_kvm_facts sys_facts;
/* Set (release) once /dev/kvm is open or known unusable; until then each
 * check tries again under sys_lock. */
static atomic_bool sys_settled;
static pthread_mutex_t sys_lock = PTHREAD_MUTEX_INITIALIZER;
/* The host's supported CPUID, read once: KVM_GET_SUPPORTED_CPUID costs
 * ~0.4 ms here (kvm_pvm), a third of a sandbox's creation (docs/restore-from-path.md). */
#define CPUID_MAX 256
/* struct kvm_cpuid2 ends in a flexible array: the entries follow it in one
 * buffer (a struct holding both is a GNU extension clang warns about). */
union cpuid_buf {
	struct kvm_cpuid2 c;
	uint8_t bytes[sizeof(struct kvm_cpuid2) + CPUID_MAX * sizeof(struct kvm_cpuid_entry2)];
};
static union cpuid_buf sys_cpuid;
static bool sys_cpuid_ok;
/* Bytes of a vCPU's XSAVE image (KVM_CAP_XSAVE2, at least struct
 * kvm_xsave's 4 KiB); 0 where KVM has no KVM_GET/SET_XSAVE, and then the
 * FXSAVE image is all the vector state there is. */
static size_t sys_xsave_size;
static bool sys_xcrs;  /* KVM_CAP_XCRS */
static bool sys_sync_events;  /* KVM_CAP_SYNC_REGS covers vCPU events too */

static int xioctl(int fd, unsigned long req, void *arg)
{
	int rc;

	do
		rc = ioctl(fd, req, arg);
	while (rc < 0 && errno == EINTR);
	return rc < 0 ? -errno : rc;
}

static bool path_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* Does /proc/cpuinfo list vmx or svm (hardware virtualization)? */
static bool cpu_has_virt(void)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen("/proc/cpuinfo", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		if (strncmp(line, "flags", 5) == 0)
			found = strstr(line, " vmx") || strstr(line, " svm");
	fclose(f);
	return found;
}

/* Why /dev/kvm could not be used: the facts probe.c judges. Only gathered
 * on failure, so a working machine pays nothing for them. */
static void facts_on_failure(struct vmm_kvm_facts *f)
{
	static const char *const vendors[] = { "kvm_intel", "kvm_amd", "kvm_pvm" };
	char path[64];
	struct stat st;

	f->mod_kvm = path_exists("/sys/module/kvm");
	for (size_t i = 0; i < sizeof(vendors) / sizeof(vendors[0]); i++) {
		snprintf(path, sizeof(path), "/sys/module/%s", vendors[i]);
		if (path_exists(path)) {
			snprintf(f->vendor, sizeof(f->vendor), "%s", vendors[i]);
			break;
		}
	}
	f->cpu_virt = cpu_has_virt();
	if (stat("/dev/kvm", &st) == 0) {
		/* getgrgid_r: this may run on the prepare thread beside a
		 * caller's own getgrgid, whose buffer is static. */
		struct group gr, *g = NULL;
		char buf[2048];
		if (getgrgid_r(st.st_gid, &gr, buf, sizeof(buf), &g) != 0)
			g = NULL;
		f->dev_mode = st.st_mode;
		if (g)
			snprintf(f->dev_group, sizeof(f->dev_group), "%s", g->gr_name);
		else
			snprintf(f->dev_group, sizeof(f->dev_group), "%u", (unsigned)st.st_gid);
	}
}

/* A failure to open that says nothing about KVM: the process is out of
 * descriptors or memory for now. */
static bool open_errno_passing(int e)
{
	return e == EMFILE || e == ENFILE || e == ENOMEM || e == EAGAIN || e == EINTR;
}

/* /dev/kvm is opened once per process: its fd only creates VMs. Returns
 * whether the verdict is final (open, or unusable for a lasting reason). */
static bool sys_open(void)
{
	struct vmm_kvm_facts *f = &sys_facts;
	struct utsname u;
	int fd;

	memset(f, 0, sizeof(*f));
	if (uname(&u) == 0)
		snprintf(f->kernel, sizeof(f->kernel), "%s", u.release);
	fd = st_sys_openat(AT_FDCWD, "/dev/kvm", O_RDWR, 0);
	if (fd < 0) {
		f->open_errno = -fd;
		if (open_errno_passing(-fd))
			return false;
		goto out_failed;
	}
	f->api_version = xioctl(fd, KVM_GET_API_VERSION, NULL);
	f->run_size = f->api_version == KVM_API_VERSION ? xioctl(fd, KVM_GET_VCPU_MMAP_SIZE, NULL) : 0;
	/* Restores stage registers in kvm_run's sync area (vmm_kvm_stage_state). */
	int sync = f->api_version == KVM_API_VERSION ? xioctl(fd, KVM_CHECK_EXTENSION, (void *)(uintptr_t)KVM_CAP_SYNC_REGS) : 0;
	f->sync_regs = sync > 0 && (sync & (KVM_SYNC_X86_REGS | KVM_SYNC_X86_SREGS)) ==
					    (KVM_SYNC_X86_REGS | KVM_SYNC_X86_SREGS);
	if (vmm_kvm_diagnose(f, NULL) < 0) {
		(void)st_sys_close(fd);
		goto out_failed;
	}
	sys_run_size = f->run_size;
	sys_sync_events = sync > 0 && (sync & KVM_SYNC_X86_EVENTS);
	sys_fd = fd;
	sys_cpuid.c.nent = CPUID_MAX;
	sys_cpuid_ok = xioctl(fd, KVM_GET_SUPPORTED_CPUID, &sys_cpuid) == 0;
	sys_xcrs = xioctl(fd, KVM_CHECK_EXTENSION, (void *)(uintptr_t)KVM_CAP_XCRS) > 0;
	if (xioctl(fd, KVM_CHECK_EXTENSION, (void *)(uintptr_t)KVM_CAP_XSAVE) > 0) {
		int x2 = xioctl(fd, KVM_CHECK_EXTENSION, (void *)(uintptr_t)KVM_CAP_XSAVE2);
		sys_xsave_size = x2 > (int)sizeof(struct kvm_xsave) ? (size_t)x2 : sizeof(struct kvm_xsave);
	}
	return true;

out_failed:
	facts_on_failure(f);
	return true;
}

/* Open /dev/kvm unless settled: a passing failure (no descriptor, no
 * memory) is no verdict on KVM, and the next check tries again. Returns
 * /dev/kvm's descriptor or -1, with *facts the facts it was judged by. */
static int sys_settle(struct vmm_kvm_facts *scratch, const struct vmm_kvm_facts **facts)
{
	int fd;

	*facts = &sys_facts;
	if (atomic_load_explicit(&sys_settled, memory_order_acquire))
		return sys_fd;
	pthread_mutex_lock(&sys_lock);
	if (!atomic_load_explicit(&sys_settled, memory_order_relaxed) && sys_open())
		atomic_store_explicit(&sys_settled, true, memory_order_release);
	fd = sys_fd;
	*scratch = sys_facts;
	*facts = scratch;
	pthread_mutex_unlock(&sys_lock);
	return fd;
}

/*
 * vmm_kvm_prepare: the settling on a thread of its own. Opening /dev/kvm
 * and reading its supported CPUID is a process's own once (~0.45 ms of
 * KVM_GET_SUPPORTED_CPUID here, kvm_pvm, where every host CPUID traps),
 * and a program makes a host before it opens and verifies the snapshot its
 * first sandbox comes from: begun at vmm_host_new, it is done or nearly
 * done by then. The first vmm_kvm_check or vmm_kvm_open waits for it on
 * sys_lock, so no caller sees it half done; one that comes first settles
 * itself, and the thread then finds it settled. A fork while the thread
 * holds sys_lock would leave the child's copy locked for ever: the atfork
 * handlers take it around every fork.
 */
static pthread_once_t prepare_once = PTHREAD_ONCE_INIT;

static void *prepare_thread(void *arg)
{
	struct vmm_kvm_facts scratch;
	const struct vmm_kvm_facts *f;

	(void)arg;
	(void)sys_settle(&scratch, &f);
	return NULL;
}

static void prepare_fork_lock(void)
{
	pthread_mutex_lock(&sys_lock);
}

static void prepare_fork_unlock(void)
{
	pthread_mutex_unlock(&sys_lock);
}

static void prepare_start(void)
{
	pthread_attr_t attr;
	pthread_t t;

	if (pthread_atfork(prepare_fork_lock, prepare_fork_unlock, prepare_fork_unlock) != 0 ||
	    pthread_attr_init(&attr) != 0)
		return;
	/* Detached: nothing waits for it but sys_lock. Without a thread (no
	 * memory, a thread limit) the first check settles as before. */
	if (pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0)
		(void)pthread_create(&t, &attr, prepare_thread, NULL);
	pthread_attr_destroy(&attr);
}

void vmm_kvm_prepare(void)
{
	if (!atomic_load_explicit(&sys_settled, memory_order_acquire))
		pthread_once(&prepare_once, prepare_start);
}

int vmm_kvm_check(struct vmm_error *err)
{
	struct vmm_kvm_facts scratch;
	const struct vmm_kvm_facts *f;

	if (sys_settle(&scratch, &f) >= 0)
		return 0;
	return vmm_kvm_diagnose(f, err);
}

int vmm_kvm_open_failed(int rc, struct vmm_error *err)
{
	/* A vmm code: /dev/kvm is unusable, and a check says why (unless a
	 * passing failure to open it has passed since). */
	if (rc <= VMM_E_POISONED && rc > VMM_E_POISONED - 100) {
		int why = vmm_kvm_check(err);
		return why < 0 ? why : vmm_fail(err, rc, "cannot use KVM: %s", vmm_strerror(rc));
	}
	return vmm_fail(err, rc, "cannot create a KVM VM: %s", strerror(-rc));
}

int vmm_kvm_open(struct vmm_kvm *k)
{
	struct vmm_kvm_facts scratch;
	const struct vmm_kvm_facts *f;
	int kvm_fd = sys_settle(&scratch, &f);
	int rc;

	if (kvm_fd < 0)
		return vmm_kvm_diagnose(f, NULL);
	k->vm_fd = k->vcpu_fd = -1;
	k->run = NULL;
	k->xsave = NULL;
	if (sys_xsave_size && !(k->xsave = st_sys_calloc(1, sys_xsave_size)))
		return -ENOMEM;
	do
		k->vm_fd = ioctl(kvm_fd, KVM_CREATE_VM, 0);
	while (k->vm_fd < 0 && errno == EINTR);
	if (k->vm_fd < 0) {
		rc = -errno;
		goto out_free_xsave;
	}
	/* Deleting or moving a memslot must not zap every shadow page (restores
	 * remap ranges inside the slot; docs/vmm.md). Older kernels lack it. */
	int quirks = ioctl(k->vm_fd, KVM_CHECK_EXTENSION, KVM_CAP_DISABLE_QUIRKS2);
	if (quirks > 0 && (quirks & KVM_X86_QUIRK_SLOT_ZAP_ALL)) {
		struct kvm_enable_cap cap = { .cap = KVM_CAP_DISABLE_QUIRKS2 };
		cap.args[0] = KVM_X86_QUIRK_SLOT_ZAP_ALL;
		(void)xioctl(k->vm_fd, KVM_ENABLE_CAP, &cap);
	}
	do
		k->vcpu_fd = ioctl(k->vm_fd, KVM_CREATE_VCPU, 0);
	while (k->vcpu_fd < 0 && errno == EINTR);
	if (k->vcpu_fd < 0) {
		rc = -errno;
		goto out_close_vm;
	}
	k->run = st_sys_mmap(NULL, (size_t)sys_run_size, PROT_READ | PROT_WRITE, MAP_SHARED, k->vcpu_fd, 0, &rc);
	if (!k->run)
		goto out_close_vcpu;
	k->run_size = (size_t)sys_run_size;
	/* Guest functions run CPUID-free; still give the vCPU the host's
	 * supported CPUID so SSE and friends are advertised consistently. */
	if (sys_cpuid_ok) {
		/* KVM_SET_CPUID2 may adjust entries: hand it a copy. */
		union cpuid_buf cpuid = sys_cpuid;
		(void)xioctl(k->vcpu_fd, KVM_SET_CPUID2, &cpuid);
	}
	return 0;

out_close_vcpu:
	st_sys_close(k->vcpu_fd);
	k->vcpu_fd = -1;
out_close_vm:
	st_sys_close(k->vm_fd);
	k->vm_fd = -1;
out_free_xsave:
	free(k->xsave);
	k->xsave = NULL;
	return rc;
}

void vmm_kvm_close(struct vmm_kvm *k)
{
	if (k->run)
		st_sys_munmap(k->run, k->run_size);
	if (k->vcpu_fd >= 0)
		st_sys_close(k->vcpu_fd);
	if (k->vm_fd >= 0)
		st_sys_close(k->vm_fd);
	free(k->xsave);
	k->xsave = NULL;
	k->run = NULL;
	k->vcpu_fd = k->vm_fd = -1;
}

int vmm_kvm_set_memory(struct vmm_kvm *k, uint64_t gpa, void *host, uint64_t size)
{
	struct kvm_userspace_memory_region r = {
		.slot = 0,
		.guest_phys_addr = gpa,
		.memory_size = size,
		.userspace_addr = (uint64_t)(uintptr_t)host,
	};

	return xioctl(k->vm_fd, KVM_SET_USER_MEMORY_REGION, &r);
}

int vmm_kvm_recycle(struct vmm_kvm *k)
{
	/* Nothing of the previous guest may reach the next one: no pending
	 * exception, interrupt or NMI, no staged sync-area registers, no
	 * request to exit at once. Registers, segments, control registers and
	 * the FPU are all loaded by the next vmm_kvm_set_state. */
	struct kvm_vcpu_events ev;

	memset(&ev, 0, sizeof(ev));
	ev.flags = KVM_VCPUEVENT_VALID_NMI_PENDING | KVM_VCPUEVENT_VALID_SHADOW;
	if (k->run) {
		k->run->kvm_dirty_regs = 0;
		k->run->immediate_exit = 0;
	}
	/* Staged where KVM can: the next KVM_RUN loads them before it enters
	 * the guest, as the ioctl would, and a vCPU ioctl fewer is a vcpu_load
	 * fewer (kvm_pvm reads MSRs in each: docs/vmm.md, "Sandbox creation"). */
	if (k->run && sys_sync_events) {
		k->run->s.regs.events = ev;
		k->run->kvm_dirty_regs = KVM_SYNC_X86_EVENTS;
		return 0;
	}
	return xioctl(k->vcpu_fd, KVM_SET_VCPU_EVENTS, &ev);
}

void vmm_kvm_set_immediate_exit(struct vmm_kvm *k, bool on)
{
	if (k->run)
		((volatile struct kvm_run *)k->run)->immediate_exit = on;
}

int vmm_kvm_run(struct vmm_kvm *k, struct vmm_exit *ex)
{
	struct kvm_run *run = k->run;

	memset(ex, 0, sizeof(*ex));
	if (ioctl(k->vcpu_fd, KVM_RUN, 0) < 0) {
		if (errno == EINTR || errno == EAGAIN) {
			ex->kind = VMM_EXIT_INTR;
			return 0;
		}
		return -errno;
	}
	switch (run->exit_reason) {
	case KVM_EXIT_IO:
		ex->port = run->io.port;
		if (run->io.direction != KVM_EXIT_IO_OUT || run->io.size != 4 || run->io.count != 1) {
			ex->kind = VMM_EXIT_IO_BAD;
			break;
		}
		ex->kind = VMM_EXIT_IO_OUT;
		memcpy(&ex->value, (const uint8_t *)run + run->io.data_offset, 4);
		break;
	case KVM_EXIT_MMIO:
		ex->kind = VMM_EXIT_MMIO;
		ex->addr = run->mmio.phys_addr;
		ex->len = run->mmio.len;
		ex->is_write = run->mmio.is_write;
		if (ex->len == 4)
			memcpy(&ex->value, run->mmio.data, 4);
		break;
	case KVM_EXIT_HLT:
		ex->kind = VMM_EXIT_HLT;
		break;
	case KVM_EXIT_SHUTDOWN:
		ex->kind = VMM_EXIT_SHUTDOWN;
		break;
	case KVM_EXIT_INTR:
		ex->kind = VMM_EXIT_INTR;
		break;
	case KVM_EXIT_INTERNAL_ERROR:
		ex->kind = VMM_EXIT_INTERNAL;
		ex->reason = run->internal.suberror;
		break;
	default:
		ex->kind = VMM_EXIT_OTHER;
		ex->reason = run->exit_reason;
		break;
	}
	return 0;
}

static void seg_to_kvm(const struct vmm_segment *s, struct kvm_segment *k)
{
	memset(k, 0, sizeof(*k));
	k->base = s->base;
	k->limit = s->limit;
	k->selector = s->selector;
	k->type = s->type;
	k->present = s->present;
	k->dpl = s->dpl;
	k->db = s->db;
	k->s = s->s;
	k->l = s->l;
	k->g = s->g;
	k->avl = s->avl;
	k->unusable = s->unusable;
}

static void seg_from_kvm(const struct kvm_segment *k, struct vmm_segment *s)
{
	memset(s, 0, sizeof(*s));
	s->base = k->base;
	s->limit = k->limit;
	s->selector = k->selector;
	s->type = k->type;
	s->present = k->present;
	s->dpl = k->dpl;
	s->db = k->db;
	s->s = k->s;
	s->l = k->l;
	s->g = k->g;
	s->avl = k->avl;
	s->unusable = k->unusable;
}

/* struct kvm_fpu mirrors the FXSAVE image field by field (SDM Vol. 1 10.5.1). */
static void fpu_to_fx(const struct kvm_fpu *f, uint8_t fx[512])
{
	memset(fx, 0, 512);
	memcpy(fx + 0, &f->fcw, 2);
	memcpy(fx + 2, &f->fsw, 2);
	fx[4] = f->ftwx;
	memcpy(fx + 6, &f->last_opcode, 2);
	memcpy(fx + 8, &f->last_ip, 8);
	memcpy(fx + 16, &f->last_dp, 8);
	memcpy(fx + 24, &f->mxcsr, 4);
	memcpy(fx + 32, f->fpr, sizeof(f->fpr));
	memcpy(fx + 160, f->xmm, sizeof(f->xmm));
}

static void fx_to_fpu(const uint8_t fx[512], struct kvm_fpu *f)
{
	memset(f, 0, sizeof(*f));
	memcpy(&f->fcw, fx + 0, 2);
	memcpy(&f->fsw, fx + 2, 2);
	f->ftwx = fx[4];
	memcpy(&f->last_opcode, fx + 6, 2);
	memcpy(&f->last_ip, fx + 8, 8);
	memcpy(&f->last_dp, fx + 16, 8);
	memcpy(&f->mxcsr, fx + 24, 4);
	memcpy(f->fpr, fx + 32, sizeof(f->fpr));
	memcpy(f->xmm, fx + 160, sizeof(f->xmm));
}

/*
 * The XSAVE image of a vCPU whose x87 and SSE state is the FXSAVE image fx
 * and whose every other state component (AVX, AVX-512 opmask and ZMM, and
 * whatever else the host's XCR0 holds) is in its initial state: the legacy
 * region (SDM Vol. 1 13.4.1) holds fx's bytes 0-415 (x87, MXCSR and its
 * mask field, XMM0-15), the XSAVE header's XSTATE_BV says x87|SSE, and
 * everything past the header is zero. What every restore and every new
 * vCPU loads: nothing of a component the snapshot does not hold survives.
 */
#define XSAVE_HDR 512
#define XSTATE_BV_X87_SSE 3ull
static void xsave_image(uint8_t *xs, const uint8_t fx[512])
{
	uint64_t bv = XSTATE_BV_X87_SSE;

	memset(xs, 0, sys_xsave_size);
	memcpy(xs, fx, 416);
	memcpy(xs + XSAVE_HDR, &bv, sizeof(bv));
}

/* Load x87/SSE state from fx and every other component's initial state. */
static int load_vector_state(struct vmm_kvm *k, const uint8_t fx[512])
{
	struct kvm_fpu f;

	if (k->xsave) {
		xsave_image(k->xsave, fx);
		return xioctl(k->vcpu_fd, KVM_SET_XSAVE, k->xsave);
	}
	fx_to_fpu(fx, &f);
	return xioctl(k->vcpu_fd, KVM_SET_FPU, &f);
}

/* x87/SSE state into fx (MXCSR_MASK and bytes 416-511 zero), as a
 * snapshot holds it. */
static int read_vector_state(struct vmm_kvm *k, uint8_t fx[512])
{
	struct kvm_fpu f;
	int rc;

	if (k->xsave) {
		if ((rc = xioctl(k->vcpu_fd, KVM_GET_XSAVE, k->xsave)) < 0)
			return rc;
		memset(fx, 0, 512);
		memcpy(fx, k->xsave, 416);
		memset(fx + 28, 0, 4);  /* MXCSR_MASK: the CPU's, not the guest's */
		return 0;
	}
	if ((rc = xioctl(k->vcpu_fd, KVM_GET_FPU, &f)) < 0)
		return rc;
	fpu_to_fx(&f, fx);
	return 0;
}

int vmm_kvm_check_vector_state(struct vmm_kvm *k, const uint8_t fx[512], char *why, size_t whylen)
{
	/* The image's parts, each reported with its first differing byte. */
	static const struct {
		const char *name;
		size_t end;
	} parts[] = {
		{ "x87/MXCSR", 160 }, { "XMM0-15", 416 }, { "reserved", XSAVE_HDR }, { "XSAVE header", XSAVE_HDR + 64 },
		{ "an extended component (AVX, AVX-512, ...)", SIZE_MAX },
	};
	size_t first[sizeof(parts) / sizeof(parts[0])];
	int rc;

	if (!k->xsave)
		return 0;  /* read_vector_state's FXSAVE image is all there is */
	uint8_t *want = st_sys_malloc(sys_xsave_size);
	if (!want)
		return -ENOMEM;
	if ((rc = xioctl(k->vcpu_fd, KVM_GET_XSAVE, k->xsave)) < 0)
		goto out_free;
	xsave_image(want, fx);
	const uint8_t *have = k->xsave;
	bool differs = false;
	size_t part = 0;
	for (size_t p = 0; p < sizeof(parts) / sizeof(parts[0]); p++)
		first[p] = SIZE_MAX;
	for (size_t i = 0; i < sys_xsave_size; i++) {
		/* MXCSR_MASK is the CPU's; bytes 416-511 are reserved and
		 * software-available: none of them is guest state. */
		if (i == 28)
			i = 32;
		if (i >= 416 && i < XSAVE_HDR)
			i = XSAVE_HDR;
		while (i >= parts[part].end)
			part++;
		if (have[i] != want[i] && first[part] == SIZE_MAX) {
			first[part] = i;
			differs = true;
		}
	}
	rc = 0;
	if (differs) {
		size_t n = (size_t)snprintf(why, whylen, "the XSAVE image differs from the snapshot's in");
		for (size_t p = 0; p < sizeof(parts) / sizeof(parts[0]) && n < whylen; p++)
			if (first[p] != SIZE_MAX)
				n += (size_t)snprintf(why + n, whylen - n, " %s (byte %zu: %#x, not %#x)", parts[p].name,
						      first[p], have[first[p]], want[first[p]]);
		rc = VMM_E_LEAK;
	}
out_free:
	free(want);
	return rc;
}

int vmm_kvm_get_state(struct vmm_kvm *k, struct vmm_vcpu_state *st)
{
	struct kvm_regs r;
	struct kvm_sregs s;
	uint8_t fx[512];
	int rc;

	/* Registers staged by vmm_kvm_stage_state and not yet loaded by a
	 * KVM_RUN are what the vCPU will have: report those. */
	if (k->run && (k->run->kvm_dirty_regs & KVM_SYNC_X86_REGS))
		r = k->run->s.regs.regs;
	else if ((rc = xioctl(k->vcpu_fd, KVM_GET_REGS, &r)) < 0)
		return rc;
	if (k->run && (k->run->kvm_dirty_regs & KVM_SYNC_X86_SREGS))
		s = k->run->s.regs.sregs;
	else if ((rc = xioctl(k->vcpu_fd, KVM_GET_SREGS, &s)) < 0)
		return rc;
	if ((rc = read_vector_state(k, fx)) < 0)
		return rc;
	memset(st, 0, sizeof(*st));
	st->version = VMM_VCPU_STATE_VERSION;
	uint64_t g[16] = { r.rax, r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rsp, r.rbp,
			   r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14, r.r15 };
	memcpy(st->gpr, g, sizeof(g));
	st->rip = r.rip;
	st->rflags = r.rflags;
	seg_from_kvm(&s.cs, &st->cs);
	seg_from_kvm(&s.ds, &st->ds);
	seg_from_kvm(&s.es, &st->es);
	seg_from_kvm(&s.fs, &st->fs);
	seg_from_kvm(&s.gs, &st->gs);
	seg_from_kvm(&s.ss, &st->ss);
	seg_from_kvm(&s.tr, &st->tr);
	seg_from_kvm(&s.ldt, &st->ldt);
	st->gdt.base = s.gdt.base;
	st->gdt.limit = s.gdt.limit;
	st->idt.base = s.idt.base;
	st->idt.limit = s.idt.limit;
	st->cr0 = s.cr0;
	st->cr2 = s.cr2;
	st->cr3 = s.cr3;
	st->cr4 = s.cr4;
	st->cr8 = s.cr8;
	st->efer = s.efer;
	st->apic_base = s.apic_base;
	memcpy(st->fxsave, fx, sizeof(fx));
	struct kvm_xcrs x;
	if (xioctl(k->vcpu_fd, KVM_GET_XCRS, &x) == 0) {
		for (unsigned i = 0; i < x.nr_xcrs; i++)
			if (x.xcrs[i].xcr == 0)
				st->xcr0 = x.xcrs[i].value;
	}
	return 0;
}

int vmm_kvm_set_state(struct vmm_kvm *k, const struct vmm_vcpu_state *st)
{
	struct kvm_regs r = {
		.rax = st->gpr[0], .rbx = st->gpr[1], .rcx = st->gpr[2], .rdx = st->gpr[3],
		.rsi = st->gpr[4], .rdi = st->gpr[5], .rsp = st->gpr[6], .rbp = st->gpr[7],
		.r8 = st->gpr[8], .r9 = st->gpr[9], .r10 = st->gpr[10], .r11 = st->gpr[11],
		.r12 = st->gpr[12], .r13 = st->gpr[13], .r14 = st->gpr[14], .r15 = st->gpr[15],
		.rip = st->rip, .rflags = st->rflags,
	};
	struct kvm_sregs s;
	int rc;

	if (st->version != VMM_VCPU_STATE_VERSION)
		return -EINVAL;
	/* Start from KVM's view so fields strata does not model keep their values. */
	if ((rc = xioctl(k->vcpu_fd, KVM_GET_SREGS, &s)) < 0)
		return rc;
	seg_to_kvm(&st->cs, &s.cs);
	seg_to_kvm(&st->ds, &s.ds);
	seg_to_kvm(&st->es, &s.es);
	seg_to_kvm(&st->fs, &s.fs);
	seg_to_kvm(&st->gs, &s.gs);
	seg_to_kvm(&st->ss, &s.ss);
	seg_to_kvm(&st->tr, &s.tr);
	seg_to_kvm(&st->ldt, &s.ldt);
	s.gdt.base = st->gdt.base;
	s.gdt.limit = st->gdt.limit;
	s.idt.base = st->idt.base;
	s.idt.limit = st->idt.limit;
	s.cr0 = st->cr0;
	s.cr2 = st->cr2;
	s.cr3 = st->cr3;
	s.cr4 = st->cr4;
	s.cr8 = st->cr8;
	s.efer = st->efer;
	if (st->apic_base)
		s.apic_base = st->apic_base;
	memset(s.interrupt_bitmap, 0, sizeof(s.interrupt_bitmap));
	if ((rc = xioctl(k->vcpu_fd, KVM_SET_SREGS, &s)) < 0 ||
	    (rc = xioctl(k->vcpu_fd, KVM_SET_REGS, &r)) < 0 ||
	    (rc = load_vector_state(k, st->fxsave)) < 0)
		return rc;
	/* XCR0 too (a recycled shell's last guest may have left another);
	 * a KVM without XCRS has only the reset value. */
	if (st->xcr0 && sys_xcrs) {
		struct kvm_xcrs x = { .nr_xcrs = 1 };
		x.xcrs[0].xcr = 0;
		x.xcrs[0].value = st->xcr0;
		if ((rc = xioctl(k->vcpu_fd, KVM_SET_XCRS, &x)) < 0)
			return rc;
	}
	return 0;
}

int vmm_kvm_get_cr2(struct vmm_kvm *k, uint64_t *cr2)
{
	struct kvm_sregs s;
	int rc = xioctl(k->vcpu_fd, KVM_GET_SREGS, &s);

	if (rc < 0)
		return rc;
	*cr2 = s.cr2;
	return 0;
}

/*
 * Restore fast path: general and special registers go into
 * kvm_run's sync area (KVM_CAP_SYNC_REGS) and load with the next KVM_RUN, so
 * they cost no ioctl; only the vector state needs one (KVM_SET_XSAVE: the
 * whole image, so no AVX or AVX-512 register keeps a value). XCR0 is left as it is: CPL 3
 * cannot change it (XSETBV is privileged). Every field of kvm_sregs is
 * modelled in vmm_vcpu_state, so no read-modify-write is needed.
 */
int vmm_kvm_stage_state(struct vmm_kvm *k, const struct vmm_vcpu_state *st)
{
	struct kvm_run *run = k->run;

	if (st->version != VMM_VCPU_STATE_VERSION || !run)
		return -EINVAL;
	struct kvm_regs *r = &run->s.regs.regs;
	*r = (struct kvm_regs){
		.rax = st->gpr[0], .rbx = st->gpr[1], .rcx = st->gpr[2], .rdx = st->gpr[3],
		.rsi = st->gpr[4], .rdi = st->gpr[5], .rsp = st->gpr[6], .rbp = st->gpr[7],
		.r8 = st->gpr[8], .r9 = st->gpr[9], .r10 = st->gpr[10], .r11 = st->gpr[11],
		.r12 = st->gpr[12], .r13 = st->gpr[13], .r14 = st->gpr[14], .r15 = st->gpr[15],
		.rip = st->rip, .rflags = st->rflags,
	};
	struct kvm_sregs *s = &run->s.regs.sregs;
	memset(s, 0, sizeof(*s));
	seg_to_kvm(&st->cs, &s->cs);
	seg_to_kvm(&st->ds, &s->ds);
	seg_to_kvm(&st->es, &s->es);
	seg_to_kvm(&st->fs, &s->fs);
	seg_to_kvm(&st->gs, &s->gs);
	seg_to_kvm(&st->ss, &s->ss);
	seg_to_kvm(&st->tr, &s->tr);
	seg_to_kvm(&st->ldt, &s->ldt);
	s->gdt.base = st->gdt.base;
	s->gdt.limit = st->gdt.limit;
	s->idt.base = st->idt.base;
	s->idt.limit = st->idt.limit;
	s->cr0 = st->cr0;
	s->cr2 = st->cr2;
	s->cr3 = st->cr3;
	s->cr4 = st->cr4;
	s->cr8 = st->cr8;
	s->efer = st->efer;
	s->apic_base = st->apic_base;
	if (!s->apic_base)
		return vmm_kvm_set_state(k, st);  /* a state that never came from KVM */
	int rc = load_vector_state(k, st->fxsave);
	if (rc < 0)
		return rc;
	run->kvm_dirty_regs |= KVM_SYNC_X86_REGS | KVM_SYNC_X86_SREGS;
	return 0;
}
