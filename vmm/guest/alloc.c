/* strata guest heap: malloc/free that write only the pages they hand out (see docs/guest-alloc.md). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "own_stdlib.h"
#include "own_string.h"
#include "include/strata_heap.h"

/*
 * Layout (docs/guest-alloc.md has the why and the measurements):
 * - The heap is handed out in 4 KiB pages from the bottom. Everything at or
 *   above `top` has never been handed out, so it is untouched and reads as
 *   zero; init only stores the bounds.
 * - Small blocks (<= 2016 bytes) live in one-page slabs of one size class.
 *   The slab header sits at the start of its page, so the metadata shares
 *   the page with the objects; objects are carved in address order (bump)
 *   before freed ones are reused, so a slab's page is the only one touched.
 * - Large blocks are whole, page-aligned page runs. Their descriptors (and
 *   those of free runs) are 48-byte records in descriptor slabs, found
 *   through small hash tables in .bss: no table spans the heap.
 * - Free runs are coalesced on free (found by start and end address) and
 *   kept in size bins. Allocation takes a fitting free run, else extends
 *   the free run that ends at `top`, else takes pages at `top`. Free pages
 *   may hold old data; pages taken at `top` do not.
 * One vCPU and no interrupts in the guest: no locking.
 */

#define PAGE_SIZE ((uintptr_t)4096)
#define SLAB_HDR 64
#define SLAB_MAGIC 0x5354534cu /* "STSL" */
#define SMALL_MAX 2016
#define DESC_CLASS NCLASSES
#define HASH_BITS 6
#define HASH_BUCKETS (1u << HASH_BITS)
#define EXACT_BINS 16 /* runs of 1..16 pages have a bin per size */
#define NBINS 64

/* Size classes: 16-byte steps up to 128, then sizes that divide the 4032
 * bytes after the header evenly (14 x 288, 9 x 448, 2 x 2016...). */
static const uint16_t class_size[] = {
	16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256,
	288, 336, 400, 448, 496, 576, 672, 800, 1008, 1344, 2016,
	48, /* DESC_CLASS: run descriptors */
};
#define NCLASSES ((int)(sizeof class_size / sizeof class_size[0]) - 1)

struct slab {
	uint32_t magic;
	uint16_t cls;
	uint16_t cap;     /* objects that fit */
	uint16_t used;    /* objects handed out */
	uint16_t bump;    /* objects ever carved; the rest are untouched */
	uint32_t pad;
	uintptr_t self;   /* its own address, a second check on free() */
	void *free;       /* freed objects, linked through their first word */
	struct slab *next, *prev; /* partial list of the class */
};

_Static_assert(sizeof(struct slab) <= SLAB_HDR, "slab header must fit its slot");

/*
 * A page run: a large block in use (in the used table) or a free run (in
 * the free start and end tables and in a size bin).
 */
struct run {
	uintptr_t addr;
	size_t npages;
	struct run *snext;        /* chain in the used or free-start table */
	struct run *enext;        /* chain in the free-end table */
	struct run *bnext, *bprev; /* size bin */
};

_Static_assert(sizeof(struct run) <= 48, "run descriptor must fit DESC_CLASS");

/* Marks a freed small object (second word) so double frees are caught. */
#define FREE_MARK ((uintptr_t)0x6672656564626c6bULL)

struct heap_state {
	uintptr_t lo, hi, top;
	size_t in_use;
	struct slab *partial[NCLASSES + 1];
	struct run *used[HASH_BUCKETS];       /* large blocks by address */
	struct run *free_start[HASH_BUCKETS]; /* free runs by first page */
	struct run *free_end[HASH_BUCKETS];   /* free runs by end address */
	struct run *bins[NBINS];
	uint64_t bin_mask;                    /* bit b set: bins[b] not empty */
};

_Static_assert(sizeof(struct heap_state) <= 4096, "heap state must fit one page");

/* About 2.3 KiB: page-aligned so the state costs one written page, not two. */
static _Alignas(4096) struct heap_state heap;

static _Noreturn void heap_corrupt(void)
{
	STRATA_LIBC_NAME(abort)();
}

static size_t pages_left_at_top(void)
{
	return (heap.hi - heap.top) / PAGE_SIZE;
}

static uintptr_t run_end(const struct run *r)
{
	return r->addr + r->npages * PAGE_SIZE;
}

/* ---- slabs ---------------------------------------------------------- */

static int class_of(size_t size)
{
	if (size <= 128)
		return size == 0 ? 0 : (int)((size + 15) / 16) - 1;
	for (int c = 8; c < NCLASSES; c++)
		if (size <= class_size[c])
			return c;
	return -1;
}

static void slab_list_add(struct slab *s)
{
	struct slab **head = &heap.partial[s->cls];

	s->prev = NULL;
	s->next = *head;
	if (*head)
		(*head)->prev = s;
	*head = s;
}

static void slab_list_del(struct slab *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		heap.partial[s->cls] = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = s->prev = NULL;
}

static void slab_init(uintptr_t page, int cls)
{
	struct slab *s = (struct slab *)page;

	*s = (struct slab){
		.magic = SLAB_MAGIC,
		.cls = (uint16_t)cls,
		.cap = (uint16_t)((PAGE_SIZE - SLAB_HDR) / class_size[cls]),
		.self = page,
	};
	slab_list_add(s);
}

static void *slab_take(struct slab *s)
{
	void *obj;

	if (s->free) {
		obj = s->free;
		s->free = *(void **)obj;
	} else {
		obj = (char *)s + SLAB_HDR + (size_t)s->bump * class_size[s->cls];
		s->bump++;
	}
	if (++s->used == s->cap)
		slab_list_del(s);
	return obj;
}

static void slab_give(struct slab *s, void *obj)
{
	uintptr_t *w = obj;

	w[0] = (uintptr_t)s->free;
	w[1] = FREE_MARK ^ (uintptr_t)obj;
	s->free = obj;
	if (s->used-- == s->cap)
		slab_list_add(s);
}

/* ---- descriptors ---------------------------------------------------- */

static uintptr_t page_get(size_t n, size_t *dirty);

/* A descriptor from an existing descriptor slab, or NULL. Never touches the
 * page runs, so it is safe while they are being edited. */
static struct run *desc_take_existing(void)
{
	struct slab *s = heap.partial[DESC_CLASS];

	return s ? slab_take(s) : NULL;
}

/* A descriptor, taking a page for a new descriptor slab if needed. */
static struct run *desc_take(void)
{
	struct run *r = desc_take_existing();
	size_t dirty;
	uintptr_t page;

	if (r)
		return r;
	page = page_get(1, &dirty);
	if (!page)
		return NULL;
	slab_init(page, DESC_CLASS);
	return desc_take_existing();
}

/* Descriptor slabs are never released, so this never edits page runs. */
static void desc_give(struct run *r)
{
	slab_give((struct slab *)((uintptr_t)r & ~(PAGE_SIZE - 1)), r);
}

/* ---- run tables ----------------------------------------------------- */

static struct run **bucket(struct run **table, uintptr_t addr)
{
	/* Fibonacci hashing: runs are often a fixed number of pages apart. */
	uint64_t h = (uint64_t)(addr / PAGE_SIZE) * 0x9e3779b97f4a7c15ULL;

	return &table[h >> (64 - HASH_BITS)];
}

static struct run *start_find(struct run **table, uintptr_t addr)
{
	for (struct run *r = *bucket(table, addr); r; r = r->snext)
		if (r->addr == addr)
			return r;
	return NULL;
}

static void start_add(struct run **table, struct run *r)
{
	struct run **b = bucket(table, r->addr);

	r->snext = *b;
	*b = r;
}

static void start_del(struct run **table, struct run *r)
{
	struct run **pp = bucket(table, r->addr);

	while (*pp != r)
		pp = &(*pp)->snext;
	*pp = r->snext;
}

static struct run *end_find(uintptr_t end)
{
	for (struct run *r = *bucket(heap.free_end, end); r; r = r->enext)
		if (run_end(r) == end)
			return r;
	return NULL;
}

static unsigned bin_of(size_t npages)
{
	unsigned log2 = 63u - (unsigned)__builtin_clzll((unsigned long long)npages);
	unsigned b;

	if (npages <= EXACT_BINS)
		return (unsigned)npages - 1;
	/* 17..31 pages share bin 16, 32..63 bin 17, and so on. */
	b = EXACT_BINS + log2 - 4;
	return b < NBINS ? b : NBINS - 1;
}

static void free_add(struct run *r)
{
	unsigned b = bin_of(r->npages);
	struct run **eb = bucket(heap.free_end, run_end(r));

	start_add(heap.free_start, r);
	r->enext = *eb;
	*eb = r;
	r->bprev = NULL;
	r->bnext = heap.bins[b];
	if (r->bnext)
		r->bnext->bprev = r;
	heap.bins[b] = r;
	heap.bin_mask |= (uint64_t)1 << b;
}

static void free_del(struct run *r)
{
	unsigned b = bin_of(r->npages);
	struct run **pp = bucket(heap.free_end, run_end(r));

	start_del(heap.free_start, r);
	while (*pp != r)
		pp = &(*pp)->enext;
	*pp = r->enext;
	if (r->bprev)
		r->bprev->bnext = r->bnext;
	else
		heap.bins[b] = r->bnext;
	if (r->bnext)
		r->bnext->bprev = r->bprev;
	if (!heap.bins[b])
		heap.bin_mask &= ~((uint64_t)1 << b);
}

/* A free run of at least n pages, the smallest in the first bin that has
 * one; NULL if none. */
static struct run *free_fit(size_t n)
{
	unsigned b = bin_of(n);
	uint64_t mask = heap.bin_mask & (~(uint64_t)0 << b);

	while (mask) {
		struct run *best = NULL;
		b = (unsigned)__builtin_ctzll(mask);
		for (struct run *r = heap.bins[b]; r; r = r->bnext) {
			if (r->npages >= n && (!best || r->npages < best->npages))
				best = r;
			/* Exact bins hold one size; stop at an exact fit. */
			if (best && (b < EXACT_BINS || best->npages == n))
				break;
		}
		if (best)
			return best;
		mask &= mask - 1;
	}
	return NULL;
}

/* ---- page runs ------------------------------------------------------ */

/*
 * n contiguous pages, or 0. *dirty is how many leading pages may hold old
 * data; the rest come from `top` and read as zero.
 */
static uintptr_t page_get(size_t n, size_t *dirty)
{
	struct run *r = free_fit(n);
	uintptr_t addr;

	if (r) {
		addr = r->addr;
		free_del(r);
		if (r->npages == n) {
			desc_give(r);
		} else {
			r->addr += n * PAGE_SIZE;
			r->npages -= n;
			free_add(r);
		}
		*dirty = n;
		return addr;
	}
	/* The free run ending at `top` can grow into it. */
	r = end_find(heap.top);
	if (r && pages_left_at_top() >= n - r->npages) {
		addr = r->addr;
		*dirty = r->npages;
		heap.top += (n - r->npages) * PAGE_SIZE;
		free_del(r);
		desc_give(r);
		return addr;
	}
	if (pages_left_at_top() >= n) {
		addr = heap.top;
		heap.top += n * PAGE_SIZE;
		*dirty = 0;
		return addr;
	}
	return 0;
}

/* Return n pages at addr to the free runs, coalescing with neighbours. */
static void page_put(uintptr_t addr, size_t n)
{
	struct run *prev = end_find(addr);
	struct run *next = start_find(heap.free_start, addr + n * PAGE_SIZE);
	struct run *r;

	if (prev) {
		free_del(prev);
		prev->npages += n;
		if (next) {
			free_del(next);
			prev->npages += next->npages;
			desc_give(next);
		}
		free_add(prev);
		return;
	}
	if (next) {
		free_del(next);
		next->addr = addr;
		next->npages += n;
		free_add(next);
		return;
	}
	r = desc_take_existing();
	if (!r) {
		/* No descriptor slot: the first freed page becomes a descriptor
		 * slab, so freeing never needs memory it does not have. */
		slab_init(addr, DESC_CLASS);
		if (--n == 0)
			return;
		addr += PAGE_SIZE;
		r = desc_take_existing();
	}
	r->addr = addr;
	r->npages = n;
	free_add(r);
}

static size_t pages_for(size_t size)
{
	return size / PAGE_SIZE + (size % PAGE_SIZE != 0);
}

/*
 * A large block of n pages aligned to align_pages pages (a power of two).
 * With zero set, the pages that may hold old data are cleared.
 */
static void *large_alloc(size_t n, size_t align_pages, bool zero)
{
	size_t total = (heap.hi - heap.lo) / PAGE_SIZE, dirty, extra = align_pages - 1;
	struct run *d;
	uintptr_t addr;

	if (n == 0)
		n = 1;
	if (extra >= total || n > total - extra)
		return NULL;
	d = desc_take();
	if (!d)
		return NULL;
	addr = page_get(n + extra, &dirty);
	if (!addr) {
		desc_give(d);
		return NULL;
	}
	if (extra) {
		uintptr_t align = align_pages * PAGE_SIZE;
		uintptr_t aligned = (addr + align - 1) & ~(align - 1);
		size_t head = (aligned - addr) / PAGE_SIZE, tail = extra - head;

		if (tail)
			page_put(aligned + n * PAGE_SIZE, tail);
		if (head)
			page_put(addr, head);
		dirty = dirty > head ? dirty - head : 0;
		addr = aligned;
	}
	if (zero && dirty)
		STRATA_LIBC_NAME(memset)((void *)addr, 0, (dirty < n ? dirty : n) * PAGE_SIZE);
	d->addr = addr;
	d->npages = n;
	start_add(heap.used, d);
	heap.in_use += n * PAGE_SIZE;
	return (void *)addr;
}

static void *small_alloc(int cls)
{
	struct slab *s = heap.partial[cls];

	if (!s) {
		size_t dirty;
		uintptr_t page = page_get(1, &dirty);
		if (!page)
			return NULL;
		slab_init(page, cls);
		s = heap.partial[cls];
	}
	heap.in_use += class_size[cls];
	return slab_take(s);
}

/* The slab holding small object p, or abort() if p is not one. */
static struct slab *small_owner(void *p)
{
	uintptr_t a = (uintptr_t)p;
	struct slab *s = (struct slab *)(a & ~(PAGE_SIZE - 1));
	size_t off;

	if (s->magic != SLAB_MAGIC || s->self != (uintptr_t)s || s->cls >= NCLASSES)
		heap_corrupt();
	off = a - (uintptr_t)s - SLAB_HDR;
	if (a - (uintptr_t)s < SLAB_HDR || off % class_size[s->cls] ||
	    off / class_size[s->cls] >= s->bump)
		heap_corrupt();
	return s;
}

/* The large block starting at p, or abort() if there is none. */
static struct run *large_owner(void *p)
{
	struct run *d = start_find(heap.used, (uintptr_t)p);

	if (!d)
		heap_corrupt();
	return d;
}

static bool in_heap(void *p)
{
	return (uintptr_t)p >= heap.lo && (uintptr_t)p < heap.top;
}

/* ---- public --------------------------------------------------------- */

void strata_heap_init(void *base, size_t size)
{
	uintptr_t b = (uintptr_t)base;
	uintptr_t lo = (b + PAGE_SIZE - 1) & ~(PAGE_SIZE - 1);
	uintptr_t end = size > UINTPTR_MAX - b ? UINTPTR_MAX : b + size;
	uintptr_t hi = end & ~(PAGE_SIZE - 1);

	heap = (struct heap_state){ 0 };
	if (lo < b || hi <= lo)
		return;
	heap.lo = heap.top = lo;
	heap.hi = hi;
}

size_t strata_heap_in_use(void)
{
	return heap.in_use;
}

size_t strata_heap_size(void)
{
	return heap.hi - heap.lo;
}

void *STRATA_LIBC_NAME(malloc)(size_t size)
{
	int cls = size <= SMALL_MAX ? class_of(size) : -1;

	if (cls >= 0)
		return small_alloc(cls);
	return large_alloc(pages_for(size), 1, false);
}

void *STRATA_LIBC_NAME(calloc)(size_t n, size_t size)
{
	size_t total;
	int cls;
	void *p;

	if (__builtin_mul_overflow(n, size, &total))
		return NULL;
	cls = total <= SMALL_MAX ? class_of(total) : -1;
	if (cls < 0)
		return large_alloc(pages_for(total), 1, true);
	/* A slab object shares its page with the slab header, which is
	 * written anyway: clearing it never touches a new page. */
	p = small_alloc(cls);
	if (p)
		STRATA_LIBC_NAME(memset)(p, 0, class_size[cls]);
	return p;
}

void *STRATA_LIBC_NAME(aligned_alloc)(size_t align, size_t size)
{
	if (align == 0 || (align & (align - 1)))
		return NULL;
	if (align <= 16)
		return STRATA_LIBC_NAME(malloc)(size);
	/* Slab blocks start at page + SLAB_HDR + i * class size, so a class
	 * that is a multiple of align (<= SLAB_HDR) gives aligned blocks. */
	if (align <= SLAB_HDR && size <= SMALL_MAX)
		for (int c = class_of(size); c < NCLASSES; c++)
			if (class_size[c] % align == 0)
				return small_alloc(c);
	if (align <= PAGE_SIZE)
		return large_alloc(pages_for(size), 1, false);
	return large_alloc(pages_for(size), align / PAGE_SIZE, false);
}

void STRATA_LIBC_NAME(free)(void *p)
{
	struct slab *s;
	uintptr_t *w = p;

	if (!p)
		return;
	if (!in_heap(p))
		heap_corrupt();
	if ((uintptr_t)p % PAGE_SIZE == 0) {
		struct run *d = large_owner(p);
		start_del(heap.used, d);
		heap.in_use -= d->npages * PAGE_SIZE;
		page_put(d->addr, d->npages);
		desc_give(d);
		return;
	}
	s = small_owner(p);
	if (w[1] == (FREE_MARK ^ (uintptr_t)p)) {
		/* Probably a double free: make sure before calling it one. */
		for (void *f = s->free; f; f = *(void **)f)
			if (f == p)
				heap_corrupt();
	}
	heap.in_use -= class_size[s->cls];
	slab_give(s, p);
	/* Give an empty slab's page back unless it is the class's last one. */
	if (s->used == 0 && (s->prev || s->next)) {
		slab_list_del(s);
		s->magic = 0;
		page_put((uintptr_t)s, 1);
	}
}

/* Grow the large block d in place to n pages, if the pages after it are
 * free or untouched. */
static bool large_grow(struct run *d, size_t n)
{
	uintptr_t end = run_end(d);
	size_t extra = n - d->npages;
	struct run *f = start_find(heap.free_start, end);

	if (!f) {
		if (end != heap.top || pages_left_at_top() < extra)
			return false;
		heap.top += extra * PAGE_SIZE;
	} else if (f->npages >= extra) {
		free_del(f);
		if (f->npages == extra) {
			desc_give(f);
		} else {
			f->addr += extra * PAGE_SIZE;
			f->npages -= extra;
			free_add(f);
		}
	} else if (run_end(f) == heap.top && pages_left_at_top() >= extra - f->npages) {
		heap.top += (extra - f->npages) * PAGE_SIZE;
		free_del(f);
		desc_give(f);
	} else {
		return false;
	}
	heap.in_use += extra * PAGE_SIZE;
	d->npages = n;
	return true;
}

void *STRATA_LIBC_NAME(realloc)(void *p, size_t size)
{
	size_t old;
	void *q;

	if (!p)
		return STRATA_LIBC_NAME(malloc)(size);
	if (size == 0) {
		STRATA_LIBC_NAME(free)(p);
		return NULL;
	}
	if (!in_heap(p))
		heap_corrupt();
	if ((uintptr_t)p % PAGE_SIZE == 0) {
		struct run *d = large_owner(p);
		size_t n;
		if (size > heap.hi - heap.lo)
			return NULL;
		n = pages_for(size);
		if (n < d->npages) {
			page_put(d->addr + n * PAGE_SIZE, d->npages - n);
			heap.in_use -= (d->npages - n) * PAGE_SIZE;
			d->npages = n;
			return p;
		}
		if (n == d->npages || large_grow(d, n))
			return p;
		old = d->npages * PAGE_SIZE;
	} else {
		old = class_size[small_owner(p)->cls];
		if (size <= old)
			return p;
	}
	q = STRATA_LIBC_NAME(malloc)(size);
	if (!q)
		return NULL;
	STRATA_LIBC_NAME(memcpy)(q, p, old < size ? old : size);
	STRATA_LIBC_NAME(free)(p);
	return q;
}
