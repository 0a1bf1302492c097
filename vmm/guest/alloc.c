/* strata guest heap: malloc/free that write only the pages they hand out (see docs/guest-alloc.md). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "include/stdlib.h"
#include "include/string.h"
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
 *   those of free runs) are 32-byte records in descriptor slabs, found
 *   through a small hash table kept in .bss: no table spans the heap.
 * - Free runs are kept address-ordered and coalesced; allocation is best
 *   fit, falling back to extending the last free run into `top`, then to
 *   `top` itself. Free pages may hold old data; pages from `top` do not.
 * One vCPU and no interrupts in the guest: no locking.
 */

#define PAGE_SIZE ((uintptr_t)4096)
#define SLAB_HDR 64
#define SLAB_MAGIC 0x5354534cu /* "STSL" */
#define SMALL_MAX 2016
#define DESC_CLASS NCLASSES
#define HASH_BUCKETS 64

/* Size classes: 16-byte steps up to 128, then sizes that divide the 4032
 * bytes after the header evenly (14 x 288, 9 x 448, 2 x 2016...). */
static const uint16_t class_size[] = {
	16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256,
	288, 336, 400, 448, 496, 576, 672, 800, 1008, 1344, 2016,
	32, /* DESC_CLASS: run descriptors */
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
	bool listed;
};

_Static_assert(sizeof(struct slab) <= SLAB_HDR, "slab header must fit its slot");

/* A page run: a large block in use (hash chained through next) or a free
 * run (address-ordered list through next/prev). */
struct run {
	uintptr_t addr;
	size_t npages;
	struct run *next, *prev;
};

_Static_assert(sizeof(struct run) <= 32, "run descriptor must fit DESC_CLASS");

/* Marks a freed small object (second word) so double frees are caught. */
#define FREE_MARK ((uintptr_t)0x6672656564626c6bULL)

struct heap_state {
	uintptr_t lo, hi, top;
	size_t in_use;
	struct slab *partial[NCLASSES + 1];
	struct run *free_head, *free_tail;
	struct run *used[HASH_BUCKETS];
};

static struct heap_state heap;

static _Noreturn void heap_corrupt(void)
{
	STRATA_LIBC_NAME(abort)();
}

static size_t pages_left_at_top(void)
{
	return (heap.hi - heap.top) / PAGE_SIZE;
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
	s->listed = true;
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
	s->listed = false;
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
 * page lists, so it is safe while they are being edited. */
static struct run *desc_take_existing(void)
{
	struct slab *s = heap.partial[DESC_CLASS];

	return s ? slab_take(s) : NULL;
}

/* A descriptor, taking a fresh page for a new descriptor slab if needed. */
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

/* Descriptor slabs are never released, so this never edits page lists. */
static void desc_give(struct run *r)
{
	slab_give((struct slab *)((uintptr_t)r & ~(PAGE_SIZE - 1)), r);
}

/* ---- page runs ------------------------------------------------------ */

static void free_list_del(struct run *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		heap.free_head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		heap.free_tail = r->prev;
}

/*
 * n contiguous pages, or 0. *dirty is how many leading pages may hold old
 * data; the rest come from `top` and read as zero.
 */
static uintptr_t page_get(size_t n, size_t *dirty)
{
	struct run *best = NULL, *last = heap.free_tail;
	uintptr_t addr;

	for (struct run *r = heap.free_head; r; r = r->next)
		if (r->npages >= n && (!best || r->npages < best->npages))
			best = r;
	if (best) {
		addr = best->addr;
		if (best->npages == n) {
			free_list_del(best);
			desc_give(best);
		} else {
			best->addr += n * PAGE_SIZE;
			best->npages -= n;
		}
		*dirty = n;
		return addr;
	}
	/* The last free run touching `top` can grow into it. */
	if (last && last->addr + last->npages * PAGE_SIZE == heap.top &&
	    pages_left_at_top() >= n - last->npages) {
		addr = last->addr;
		*dirty = last->npages;
		heap.top += (n - last->npages) * PAGE_SIZE;
		free_list_del(last);
		desc_give(last);
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
	struct run *prev = NULL, *next = heap.free_head;
	uintptr_t end = addr + n * PAGE_SIZE;
	bool join_prev, join_next;
	struct run *r;

	while (next && next->addr < addr) {
		prev = next;
		next = next->next;
	}
	join_prev = prev && prev->addr + prev->npages * PAGE_SIZE == addr;
	join_next = next && next->addr == end;
	if (join_prev && join_next) {
		prev->npages += n + next->npages;
		free_list_del(next);
		desc_give(next);
		return;
	}
	if (join_prev) {
		prev->npages += n;
		return;
	}
	if (join_next) {
		next->addr = addr;
		next->npages += n;
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
	r->prev = prev;
	r->next = next;
	if (prev)
		prev->next = r;
	else
		heap.free_head = r;
	if (next)
		next->prev = r;
	else
		heap.free_tail = r;
}

/* The free run starting exactly at addr, or NULL. */
static struct run *free_run_at(uintptr_t addr)
{
	for (struct run *r = heap.free_head; r && r->addr <= addr; r = r->next)
		if (r->addr == addr)
			return r;
	return NULL;
}

static struct run **used_bucket(uintptr_t addr)
{
	return &heap.used[(addr / PAGE_SIZE) % HASH_BUCKETS];
}

static struct run *used_find(uintptr_t addr)
{
	for (struct run *r = *used_bucket(addr); r; r = r->next)
		if (r->addr == addr)
			return r;
	return NULL;
}

static void used_add(struct run *r)
{
	struct run **b = used_bucket(r->addr);

	r->prev = NULL;
	r->next = *b;
	if (*b)
		(*b)->prev = r;
	*b = r;
}

static void used_del(struct run *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		*used_bucket(r->addr) = r->next;
	if (r->next)
		r->next->prev = r->prev;
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
	struct run *d;
	uintptr_t addr;
	size_t dirty, extra = align_pages - 1;

	if (n == 0)
		n = 1;
	if (extra >= (heap.hi - heap.lo) / PAGE_SIZE ||
	    n > (heap.hi - heap.lo) / PAGE_SIZE - extra)
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
	used_add(d);
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
	if (align <= PAGE_SIZE)
		return large_alloc(pages_for(size), 1, false);
	return large_alloc(pages_for(size), align / PAGE_SIZE, false);
}

void STRATA_LIBC_NAME(free)(void *p)
{
	if (!p)
		return;
	if (!in_heap(p))
		heap_corrupt();
	if ((uintptr_t)p % PAGE_SIZE == 0) {
		struct run *d = used_find((uintptr_t)p);
		if (!d)
			heap_corrupt();
		used_del(d);
		heap.in_use -= d->npages * PAGE_SIZE;
		page_put(d->addr, d->npages);
		desc_give(d);
		return;
	}
	struct slab *s = small_owner(p);
	uintptr_t *w = p;
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
	uintptr_t end = d->addr + d->npages * PAGE_SIZE;
	size_t extra = n - d->npages;
	struct run *f;

	if (end == heap.top) {
		if (pages_left_at_top() < extra)
			return false;
		heap.top += extra * PAGE_SIZE;
	} else if ((f = free_run_at(end))) {
		uintptr_t fend = f->addr + f->npages * PAGE_SIZE;
		if (f->npages > extra) {
			f->addr += extra * PAGE_SIZE;
			f->npages -= extra;
		} else if (f->npages == extra) {
			free_list_del(f);
			desc_give(f);
		} else if (fend == heap.top && pages_left_at_top() >= extra - f->npages) {
			heap.top += (extra - f->npages) * PAGE_SIZE;
			free_list_del(f);
			desc_give(f);
		} else {
			return false;
		}
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
		struct run *d = used_find((uintptr_t)p);
		size_t n;
		if (!d)
			heap_corrupt();
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
		struct slab *s = small_owner(p);
		old = class_size[s->cls];
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
