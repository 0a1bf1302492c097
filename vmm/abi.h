/* abi.h: the strata guest ABI (ports, call frames, typed values), shared by host and guest. */
#ifndef STRATA_VMM_ABI_H
#define STRATA_VMM_ABI_H

/*
 * Caveats: this header is the wire contract between a host and the guests
 * built with the SDK in vmm/guest/ (docs/vmm.md, "ABI"); it has no code,
 * no state and no threads. A guest built for another STRATA_ABI_VERSION is
 * refused (VMM_E_ABI), and so is a snapshot taken with one. Guest-supplied
 * addresses and records are never trusted: the host checks each against
 * the guest-visible range and the sizes here. The guest sees no signal:
 * the host's kick signal and the process backend's SIGUSR1 stop it from
 * outside. Nothing the guest keeps survives a restore, so N sandboxes from
 * one snapshot start with the same random state.
 *
 * C standard headers only: this file is compiled freestanding in the guest
 * (and its #defines are usable from the runtime's assembly).
 */
#ifndef __ASSEMBLER__
#include <stdint.h>
#endif

/*
 * Version of everything in this file. The guest states the version it was
 * built against in its ELF note; the host refuses a guest whose version it
 * does not speak. Bump on any incompatible change. docs/guest-abi.md.
 */
#define STRATA_ABI_VERSION 1

/* ELF note that marks a strata guest (PT_NOTE, name "strata", type 1). */
#define STRATA_NOTE_NAME "strata"
#define STRATA_NOTE_TYPE 1
#define STRATA_ISR_STRIDE 16
/*
 * Hypercalls from CPL 3 are 32-bit stores into the hypercall page: guest
 * virtual page STRATA_HC_VA maps guest-physical STRATA_HC_GPA, which is
 * outside guest memory, so each store is one MMIO exit. The byte offset
 * (port - STRATA_HC_PORT_BASE) * 4 names the port, the stored value is the
 * value. kvm_pvm ignores RFLAGS.IOPL and refuses `int n` from CPL 3, so a
 * direct `out` is not available there (docs/vmm.md has the measurements).
 * CPL 0 code (the host's exception stubs) uses `out %eax, %dx` to the same
 * ports.
 */
#define STRATA_HC_VA 0x16000
#define STRATA_HC_GPA 0x100000000ull
#define STRATA_HC_PORT_BASE 0x500
#define STRATA_ISR_COUNT 32
#define STRATA_PORT_EXCEPTION_NUM 0x514
#ifndef __ASSEMBLER__
struct strata_note {
	uint32_t abi_version;   /* STRATA_ABI_VERSION */
	uint32_t isr_stride;    /* bytes between exception stubs (16); checked, not used */
	uint64_t isr_base;      /* guest address of the stub for vector 0; STRATA_ISR_COUNT stubs.
				 * Checked, not used: the IDT points at the host's stubs */
};

/*
 * Optional second note (same name, type STRATA_NOTE_MEM_TYPE): the memory the
 * guest asks for, which the host uses where its caller set no size (a
 * caller's size wins, smaller or larger). 0 in a field: the host's default.
 * A guest without it gets the defaults; a host that predates it skips it
 * (notes of an unknown type are skipped), so it needs no ABI version bump.
 * Fields only ever get added at the end with a new `version`: a host reads
 * the fields of the versions it knows and ignores the rest. The host refuses
 * a note that is shorter than version 1, has version 0 or a nonzero
 * reserved field (version 1), appears twice, or asks for more than a
 * sandbox may have (docs/guest-abi.md). The SDK writes it with
 * STRATA_GUEST_HEAP / STRATA_GUEST_MEMORY (strata_guest.h).
 */
#define STRATA_NOTE_MEM_TYPE 2
#define STRATA_MEM_NOTE_VERSION 1
#define STRATA_MEM_NOTE_MAX 256   /* longest descriptor a host accepts */
struct strata_mem_note {
	uint32_t version;       /* STRATA_MEM_NOTE_VERSION */
	uint32_t reserved;      /* 0 */
	uint64_t heap_size;     /* bytes of heap; 0: the host's default */
	uint64_t stack_size;    /* bytes of stack; 0: the host's default */
};

/*
 * Fixed guest-physical (= guest-virtual) addresses. The rest of the layout is
 * computed by the host from the configured sizes and published to the guest
 * in struct strata_boot_info. docs/vmm.md has the whole map.
 */
#endif /* __ASSEMBLER__ */
#define STRATA_BOOT_INFO_GPA 0x15000   /* struct strata_boot_info, read-only to the guest */
#define STRATA_TLS_GPA 0x15800         /* struct strata_tls: the fs base, in the boot-info page */
#define STRATA_IMAGE_BASE 0x100000     /* lowest address an image segment may use */
#ifndef __ASSEMBLER__

/*
 * Hypercall ports (see STRATA_HC_VA above for how CPL 3 reaches them). The
 * 32-bit value is a guest address of the request record (or a status for
 * RETURN). Each is one VM exit; the guest resumes after the store when the
 * host is done.
 */
enum strata_port {
	STRATA_PORT_RETURN = 0x510,    /* eax: status (enum strata_status); result frame in the output buffer */
	STRATA_PORT_HOSTCALL = 0x511,  /* eax: address of struct strata_hostcall */
	STRATA_PORT_LOG = 0x512,       /* eax: address of struct strata_log */
	STRATA_PORT_ABORT = 0x513,     /* eax: address of struct strata_abort */
	STRATA_PORT_EXCEPTION = STRATA_PORT_EXCEPTION_NUM, /* eax: address of struct strata_exception_frame (CPL 0 stub) */
	STRATA_PORT_READY = 0x515,     /* eax: address of struct strata_fn_table, once after init */
};

/* Value types of arguments and results. */
enum strata_type {
	STRATA_T_VOID = 0,   /* results only: nothing */
	STRATA_T_I64 = 1,    /* signed 64-bit integer, in `i64` */
	STRATA_T_BYTES = 2,  /* `len` bytes at guest address `addr` */
	STRATA_T_STR = 3,    /* like bytes; `len` excludes the terminating NUL which follows */
};

/* A typed value. Signature letters: 'v' void, 'i' i64, 'b' bytes, 's' string. */
struct strata_value {
	uint32_t type;       /* enum strata_type */
	uint32_t reserved;   /* 0 */
	int64_t i64;         /* STRATA_T_I64 */
	uint64_t addr;       /* BYTES/STR: guest address of the data */
	uint64_t len;        /* BYTES/STR: length in bytes */
};

#define STRATA_MAX_ARGS 8u
#define STRATA_NAME_MAX 64u   /* function names, including NUL */
#define STRATA_SIG_MAX 16u    /* signatures "r(aaaa)", including NUL */

/* Host -> guest: written at the start of the input buffer before each call. */
#define STRATA_CALL_MAGIC 0x4c4c4143u /* "CALL" */
struct strata_call_frame {
	uint32_t magic;      /* STRATA_CALL_MAGIC */
	uint32_t fn;         /* index into the guest's function table */
	uint32_t nargs;
	uint32_t reserved;
	uint64_t seq;        /* call number, echoed in the result */
	struct strata_value args[STRATA_MAX_ARGS];
	/* argument bytes follow, each string NUL-terminated */
};

/* Guest -> host: written at the start of the output buffer before RETURN. */
#define STRATA_RESULT_MAGIC 0x544c5352u /* "RSLT" */
struct strata_result_frame {
	uint32_t magic;      /* STRATA_RESULT_MAGIC */
	uint32_t status;     /* enum strata_status, same as the RETURN eax */
	uint64_t seq;        /* the call frame's seq */
	struct strata_value ret;  /* BYTES/STR may point anywhere in guest memory */
	uint64_t msg_addr;   /* status != OK: guest address of a message */
	uint64_t msg_len;    /* the host keeps at most STRATA_MSG_MAX bytes of it */
};

/* The longest guest error message the host keeps (strata_fail's, whole: a
 * Lua error's message and its traceback); a longer one is cut there. */
#define STRATA_MSG_MAX 4096

enum strata_status {
	STRATA_OK = 0,
	STRATA_ERR_NO_FUNCTION = 1,  /* fn index out of range */
	STRATA_ERR_BAD_FRAME = 2,    /* call frame malformed (magic, nargs, types) */
	STRATA_ERR_FUNCTION = 3,     /* the function reported an error (message) */
};

/* Guest -> host: call a host function by name. The host writes the result
 * into `ret` (for BYTES/STR, into the guest's buffer at ret.addr, at most
 * ret_cap bytes, and sets ret.len) and `status`. */
struct strata_hostcall {
	uint64_t name_addr;  /* NUL-terminated, < STRATA_NAME_MAX */
	uint32_t nargs;
	uint32_t status;     /* out: enum strata_hostcall_status */
	struct strata_value args[STRATA_MAX_ARGS];
	struct strata_value ret;  /* out; for BYTES/STR the guest sets addr and ret_cap */
	uint64_t ret_cap;
};

enum strata_hostcall_status {
	STRATA_HOST_OK = 0,
	STRATA_HOST_NO_FUNCTION = 1,  /* no host function by that name */
	STRATA_HOST_BAD_ARGS = 2,     /* arity or types do not match its signature */
	STRATA_HOST_FAILED = 3,       /* the host function reported an error */
	STRATA_HOST_TOO_SMALL = 4,    /* result larger than ret_cap; ret.len = needed */
};

/* Guest -> host: a log line. */
struct strata_log {
	uint32_t level;      /* 0 error, 1 warn, 2 info, 3 debug */
	uint32_t reserved;
	uint64_t addr;       /* message bytes */
	uint64_t len;
};

/* Guest -> host: give up with a message; the sandbox is poisoned. */
struct strata_abort {
	int64_t code;
	uint64_t addr;       /* message bytes */
	uint64_t len;
};

/* Pushed by the host's CPL 0 exception stub on the exception stack: the vector and
 * error code it pushed, then the CPU's interrupt frame (SDM Vol. 3A 6.14.2). */
struct strata_exception_frame {
	uint64_t vector;
	uint64_t error_code;
	uint64_t rip;
	uint64_t cs;
	uint64_t rflags;
	uint64_t rsp;
	uint64_t ss;
};

/* One guest function, as the guest publishes it at READY. */
struct strata_fn_desc {
	uint64_t name_addr;  /* NUL-terminated */
	uint64_t sig_addr;   /* NUL-terminated, e.g. "s(s)", "i(ii)", "v()" */
	uint64_t entry;      /* guest code address (informational) */
};

#define STRATA_FN_TABLE_MAGIC 0x534e5546u /* "FUNS" */
#define STRATA_MAX_FUNCTIONS 256u
struct strata_fn_table {
	uint32_t magic;      /* STRATA_FN_TABLE_MAGIC */
	uint32_t count;      /* <= STRATA_MAX_FUNCTIONS */
	uint64_t descs_addr; /* struct strata_fn_desc[count] */
};

/* Host -> guest: where everything is. Read-only page at STRATA_BOOT_INFO_GPA. */
#define STRATA_BOOT_MAGIC 0x544f4f42u /* "BOOT" */
struct strata_boot_info {
	uint32_t magic;
	uint32_t abi_version;
	uint64_t in_addr, in_size;     /* input buffer: call frames */
	uint64_t out_addr, out_size;   /* output buffer: result frames */
	uint64_t heap_addr, heap_size;
	uint64_t stack_lo, stack_hi;   /* stack; the page below stack_lo is a guard */
	uint64_t mem_size;             /* guest memory size */
};

/*
 * The thread block: fs base is STRATA_TLS_GPA on both backends, set by the
 * host and put back by every restore (a snapshot with another fs base is
 * refused). It shares the read-only boot-info page, so a guest cannot
 * change it. The layout is the x86-64 one compiled code expects: word 0
 * holds its own address, %fs:0x28 the stack protector's canary (random,
 * written by the host when it builds the sandbox, its low byte 0 so a
 * string copy cannot read past it; kept by snapshots like any guest page).
 */
struct strata_tls {
	uint64_t self;         /* STRATA_TLS_GPA */
	uint64_t reserved[4];  /* 0 */
	uint64_t canary;       /* %fs:0x28 */
};

#endif /* __ASSEMBLER__ */

#endif
