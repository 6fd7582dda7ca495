/* SPDX-License-Identifier: MIT */
/*
 * The event loop: epoll for fds, a FIFO of deferred work, one-shot timers.
 * Ring mode (bs_loop_use_ring): the loop waits in io_uring instead, fds
 * are watched with one-shot POLL_ADDs re-armed after each event (level
 * semantics, as with epoll), and callers may queue their own operations
 * (bs_loop_sqe): they go to the kernel with the wait, one syscall.
 */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <blkstack/loop.h>

struct fd_watch {
	int fd;
	bs_fd_fn fn;
	void *arg;
	struct fd_watch *next;
	/* ring mode */
	struct bs_loop *loop;
	struct bs_ring_op op;
	uint32_t events;	/* wanted */
	bool armed;		/* a POLL_ADD of it is in the ring */
	bool dead;		/* deleted while armed: freed when it returns */
};

struct prepoll {
	bs_fn fn;
	void *arg;
	struct prepoll *next;
};

struct timer {
	int id;
	uint64_t due_ns;
	bs_fn fn;
	void *arg;
	struct timer *next;
};

struct posted {
	bs_fn fn;
	void *arg;
	struct posted *next;
};

struct bs_loop {
	int epfd;
	int evfd;			/* wakes the loop for bs_loop_post() */
	struct fd_watch *watches;
	struct fd_watch *dead;		/* deleted watches, freed after dispatch */
	struct bs_work *dq_head, *dq_tail;
	unsigned long dq_len;
	struct prepoll *prepolls;
	struct timer *timers;		/* sorted by due time */
	int next_timer_id;
	bool stop;
	int depth;			/* nesting of bs_loop_run_once() */
	pthread_mutex_t post_lock;
	struct posted *posted;
	struct bs_work *inbox_head, *inbox_tail; /* bs_loop_send() from afar */
	pthread_t owner;		/* the thread that runs it */
	unsigned index;			/* bs_loop_set_index() */
	/*
	 * Quiescent points for snapshot readers (snap.c): iterations begun,
	 * and whether the loop is blocked in epoll_wait (holding nothing).
	 */
	uint64_t iterations;		/* atomic */
	int idle;			/* atomic */
	/* adaptive polling before blocking (bs_loop_set_poll) */
	uint64_t poll_max_ns, poll_ns;
	/* ring mode (bs_loop_use_ring) */
	bool ring_on;
	bool freeing;			/* bs_loop_free(): last completions */
	bool ev_armed;			/* evfd's POLL_ADD is in the ring */
	struct io_uring ring;
	struct bs_ring_op ev_op;	/* bs_loop_post() wake-ups */
};

/* The loop the calling thread is running (or created last), or NULL. */
static __thread struct bs_loop *tls_loop;

static void free_dead(struct bs_loop *loop);
static void adapt(struct bs_loop *loop, bool got, uint64_t waited);
static void ring_reap(struct bs_loop *loop);

uint64_t bs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int bs_loop_new(struct bs_loop **out)
{
	struct bs_loop *loop = calloc(1, sizeof(*loop));
	struct epoll_event ev = { .events = EPOLLIN };
	int err;

	if (!loop)
		return -ENOMEM;
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	loop->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (loop->epfd < 0 || loop->evfd < 0) {
		err = -errno;
		goto fail;
	}
	ev.data.ptr = NULL; /* NULL marks the wake-up eventfd */
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->evfd, &ev) < 0) {
		err = -errno;
		goto fail;
	}
	pthread_mutex_init(&loop->post_lock, NULL);
	loop->next_timer_id = 1;
	loop->owner = pthread_self();
	if (!tls_loop)
		tls_loop = loop;
	*out = loop;
	return 0;
fail:
	if (loop->epfd >= 0)
		close(loop->epfd);
	if (loop->evfd >= 0)
		close(loop->evfd);
	free(loop);
	return err;
}

void bs_loop_free(struct bs_loop *loop)
{
	if (!loop)
		return;
	if (loop->ring_on) {
		/*
		 * Completions of operations cancelled at the end (a closed
		 * connection's receive) free what they name; no fd callback
		 * runs any more, the watches are freed below.
		 */
		loop->freeing = true;
		ring_reap(loop);
		io_uring_queue_exit(&loop->ring);
	}
	while (loop->watches) {
		struct fd_watch *w = loop->watches;
		loop->watches = w->next;
		free(w);
	}
	free_dead(loop);
	while (loop->prepolls) {
		struct prepoll *p = loop->prepolls;
		loop->prepolls = p->next;
		free(p);
	}
	while (loop->timers) {
		struct timer *t = loop->timers;
		loop->timers = t->next;
		free(t);
	}
	while (loop->posted) {
		struct posted *p = loop->posted;
		loop->posted = p->next;
		free(p);
	}
	pthread_mutex_destroy(&loop->post_lock);
	if (tls_loop == loop)
		tls_loop = NULL;
	close(loop->epfd);
	close(loop->evfd);
	free(loop);
}

/* ---- ring mode ----------------------------------------------------------- */

#define RING_CQ_PER_SQ 8	/* CQ entries per SQ entry: many polls armed */

struct io_uring_sqe *bs_loop_sqe(struct bs_loop *loop)
{
	struct io_uring_sqe *sqe;

	if (!loop->ring_on)
		return NULL;
	sqe = io_uring_get_sqe(&loop->ring);
	if (!sqe) {
		/* the SQ is full: hand it to the kernel now (no wait) */
		io_uring_submit(&loop->ring);
		sqe = io_uring_get_sqe(&loop->ring);
	}
	return sqe;
}

bool bs_loop_has_ring(const struct bs_loop *loop)
{
	return loop->ring_on;
}

int bs_loop_ring_cancel(struct bs_loop *loop, struct bs_ring_op *op)
{
	struct io_uring_sync_cancel_reg reg = {
		.addr = (uint64_t)(uintptr_t)op,
		.fd = -1,
		.timeout = { .tv_sec = -1, .tv_nsec = -1 },
	};
	int err;

	if (!loop->ring_on)
		return -EOPNOTSUPP;
	/* what is still in the SQ would reach the kernel after the cancel */
	io_uring_submit(&loop->ring);
	do
		err = io_uring_register_sync_cancel(&loop->ring, &reg);
	while (err == -EINTR);
	return err == -ENOENT || err == -EALREADY ? 0 : err;
}

static void watch_cqe(struct bs_ring_op *op, int res, uint32_t flags);

/* Queue @w's one-shot poll for its events. */
static void arm(struct fd_watch *w)
{
	struct io_uring_sqe *sqe = bs_loop_sqe(w->loop);

	if (!sqe)
		return;	/* cannot happen: bs_loop_sqe() submits to make room */
	io_uring_prep_poll_add(sqe, w->fd, w->events);
	io_uring_sqe_set_data(sqe, &w->op);
	w->armed = true;
}

/* Take @w's armed poll back (its CQE comes, -ECANCELED, to watch_cqe). */
static void disarm(struct fd_watch *w)
{
	struct io_uring_sqe *sqe = bs_loop_sqe(w->loop);

	if (!sqe)
		return;
	io_uring_prep_poll_remove(sqe, (uint64_t)(uintptr_t)&w->op);
	io_uring_sqe_set_data(sqe, NULL);
}

static void unlink_watch(struct bs_loop *loop, struct fd_watch *w)
{
	struct fd_watch **pp;

	for (pp = &loop->watches; *pp; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			return;
		}
	}
}

static void watch_cqe(struct bs_ring_op *op, int res, uint32_t flags)
{
	struct fd_watch *w = BS_CONTAINER_OF(op, struct fd_watch, op);
	struct bs_loop *loop = w->loop;

	(void)flags;
	w->armed = false;
	if (loop->freeing)	/* freed with the loop's list */
		return;
	if (w->dead) {		/* deleted while armed: this was its last */
		unlink_watch(loop, w);
		free(w);
		return;
	}
	if (res > 0) {
		uint32_t ev = (uint32_t)res &
			      (w->events | EPOLLERR | EPOLLHUP);

		if (ev && w->fn)
			w->fn(w->arg, ev);
	}
	/* -ECANCELED (its events changed) or after the callback: again,
	 * unless the callback deleted it (then it is on loop->dead) */
	if (w->fn && !w->armed && w->events)
		arm(w);
}

static void ev_cqe(struct bs_ring_op *op, int res, uint32_t flags);

static void arm_ev(struct bs_loop *loop)
{
	struct io_uring_sqe *sqe = bs_loop_sqe(loop);

	if (!sqe)
		return;
	io_uring_prep_poll_add(sqe, loop->evfd, EPOLLIN);
	io_uring_sqe_set_data(sqe, &loop->ev_op);
	loop->ev_armed = true;
}

static void run_posted(struct bs_loop *loop);

static void ev_cqe(struct bs_ring_op *op, int res, uint32_t flags)
{
	struct bs_loop *loop = BS_CONTAINER_OF(op, struct bs_loop, ev_op);

	(void)res;
	(void)flags;
	loop->ev_armed = false;
	if (loop->freeing)
		return;
	run_posted(loop);
	if (!loop->ev_armed)
		arm_ev(loop);
}

int bs_loop_use_ring(struct bs_loop *loop, unsigned entries)
{
	/*
	 * Cooperative task work: a completion that needs this thread (a
	 * receive that waited for data, a poll) does not interrupt it with
	 * an IPI, which costs much in a VM; a sleeping waiter is still woken,
	 * and a spinning one sees IORING_SQ_TASKRUN and enters to run it.
	 */
	struct io_uring_params p = {
		.flags = IORING_SETUP_CQSIZE | IORING_SETUP_COOP_TASKRUN |
			 IORING_SETUP_TASKRUN_FLAG,
		.cq_entries = entries * RING_CQ_PER_SQ,
	};
	struct io_uring_sync_cancel_reg reg = {
		.addr = (uint64_t)(uintptr_t)&loop->ev_op,
		.fd = -1,
		.timeout = { .tv_sec = -1, .tv_nsec = -1 },
	};
	int err;

	if (loop->ring_on)
		return 0;
	if (loop->watches)
		return -EBUSY;
	err = io_uring_queue_init_params(entries, &loop->ring, &p);
	if (err == -EINVAL) {	/* before Linux 5.19 */
		p = (struct io_uring_params){
			.flags = IORING_SETUP_CQSIZE,
			.cq_entries = entries * RING_CQ_PER_SQ,
		};
		err = io_uring_queue_init_params(entries, &loop->ring, &p);
	}
	if (err)
		return err;
	/*
	 * Connections cancel their operations synchronously when they close
	 * (bs_loop_ring_cancel, Linux 6.0): nothing cancelled, nothing to
	 * wait for, is -ENOENT where the kernel has it.
	 */
	err = io_uring_register_sync_cancel(&loop->ring, &reg);
	if (err != -ENOENT) {
		io_uring_queue_exit(&loop->ring);
		return err < 0 ? err : -EOPNOTSUPP;
	}
	/* wake-ups come through the ring now, not through epoll */
	epoll_ctl(loop->epfd, EPOLL_CTL_DEL, loop->evfd, NULL);
	loop->ev_op.fn = ev_cqe;
	loop->ring_on = true;
	arm_ev(loop);
	return 0;
}

/* Hand every completion there is to its op (at most one CQ's worth). */
static void ring_reap(struct bs_loop *loop)
{
	unsigned n = *loop->ring.cq.kring_entries;
	struct io_uring_cqe *cqe;

	loop->depth++;
	while (n-- && io_uring_peek_cqe(&loop->ring, &cqe) == 0) {
		struct bs_ring_op *op = io_uring_cqe_get_data(cqe);
		int res = cqe->res;
		uint32_t flags = cqe->flags;

		/* consumed first: the op may run the loop again (nested) */
		io_uring_cqe_seen(&loop->ring, cqe);
		if (op)
			op->fn(op, res, flags);
	}
	loop->depth--;
	if (!loop->depth)
		free_dead(loop);
}

/* Completions to reap, or task work to run for them (no syscall). */
static bool ring_ready(struct bs_loop *loop)
{
	return io_uring_cq_ready(&loop->ring) ||
	       (IO_URING_READ_ONCE(*loop->ring.sq.kflags) & IORING_SQ_TASKRUN);
}

/* Wait up to @timeout_ms (-1: no limit) for a completion; 0 or -errno. */
static int ring_wait(struct bs_loop *loop, int timeout_ms)
{
	struct io_uring_cqe *cqe;
	uint64_t t0 = 0;
	int err;

	if (ring_ready(loop) || !timeout_ms) {
		if (io_uring_sq_ready(&loop->ring))
			io_uring_submit(&loop->ring);
		return 0;
	}
	if (loop->poll_ns) {
		uint64_t end = bs_now_ns() + loop->poll_ns;

		if (io_uring_sq_ready(&loop->ring))
			io_uring_submit(&loop->ring);
		/* no syscall: completions land in the mapped CQ, task work
		 * raises a flag in the mapped SQ ring */
		do {
			if (ring_ready(loop))
				return 0;
		} while (bs_now_ns() < end);
	}
	if (loop->poll_max_ns)
		t0 = bs_now_ns();
	__atomic_store_n(&loop->idle, 1, __ATOMIC_SEQ_CST);
	if (timeout_ms < 0) {
		err = io_uring_submit_and_wait(&loop->ring, 1);
	} else {
		struct __kernel_timespec ts = {
			.tv_sec = timeout_ms / 1000,
			.tv_nsec = (long long)(timeout_ms % 1000) * 1000000,
		};

		err = io_uring_submit_and_wait_timeout(&loop->ring, &cqe, 1,
						       &ts, NULL);
	}
	__atomic_store_n(&loop->idle, 0, __ATOMIC_SEQ_CST);
	if (t0)
		adapt(loop, io_uring_cq_ready(&loop->ring) > 0,
		      bs_now_ns() - t0);
	if (err == -ETIME || err == -EINTR || err == -EBUSY)
		return 0;
	return err < 0 ? err : 0;
}

/* ---- fd watches ---------------------------------------------------------- */

int bs_loop_add_fd(struct bs_loop *loop, int fd, uint32_t events, bs_fd_fn fn,
		   void *arg)
{
	struct fd_watch *w = calloc(1, sizeof(*w));
	struct epoll_event ev = { .events = events };

	if (!w)
		return -ENOMEM;
	w->fd = fd;
	w->fn = fn;
	w->arg = arg;
	w->loop = loop;
	w->events = events;
	w->op.fn = watch_cqe;
	if (loop->ring_on) {
		w->next = loop->watches;
		loop->watches = w;
		if (events)
			arm(w);
		return 0;
	}
	ev.data.ptr = w;
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int err = -errno;
		free(w);
		return err;
	}
	w->next = loop->watches;
	loop->watches = w;
	return 0;
}

static struct fd_watch *find_watch(struct bs_loop *loop, int fd,
				   struct fd_watch ***link)
{
	struct fd_watch **pp;

	for (pp = &loop->watches; *pp; pp = &(*pp)->next) {
		if ((*pp)->fd == fd && !(*pp)->dead) {
			if (link)
				*link = pp;
			return *pp;
		}
	}
	return NULL;
}

int bs_loop_mod_fd(struct bs_loop *loop, int fd, uint32_t events)
{
	struct fd_watch *w = find_watch(loop, fd, NULL);
	struct epoll_event ev = { .events = events };

	if (!w)
		return -ENOENT;
	if (loop->ring_on) {
		if (events == w->events)
			return 0;
		w->events = events;
		if (w->armed)
			disarm(w);	/* re-armed with these when it returns */
		else if (events)
			arm(w);
		return 0;
	}
	ev.data.ptr = w;
	if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -errno;
	return 0;
}

void bs_loop_del_fd(struct bs_loop *loop, int fd)
{
	struct fd_watch **link, *w = find_watch(loop, fd, &link);

	if (!w)
		return;
	if (loop->ring_on && w->armed) {
		/* its poll still names it: freed when that comes back */
		w->fn = NULL;
		w->fd = -1;
		w->dead = true;
		disarm(w);
		return;
	}
	if (!loop->ring_on)
		epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL);
	*link = w->next;
	/*
	 * An event for this watch may already be in the batch being
	 * dispatched; mark it dead and free it after the batch.
	 */
	w->fn = NULL;
	w->fd = -1;
	w->next = loop->dead;
	loop->dead = w;
}

static void free_dead(struct bs_loop *loop)
{
	while (loop->dead) {
		struct fd_watch *w = loop->dead;
		loop->dead = w->next;
		free(w);
	}
}

void bs_loop_defer(struct bs_loop *loop, struct bs_work *w)
{
	w->next = NULL;
	if (loop->dq_tail)
		loop->dq_tail->next = w;
	else
		loop->dq_head = w;
	loop->dq_tail = w;
	loop->dq_len++;
}

static bool inbox_cancel(struct bs_loop *loop, struct bs_work *w)
{
	struct bs_work *prev = NULL, *it;
	bool found = false;

	pthread_mutex_lock(&loop->post_lock);
	for (it = loop->inbox_head; it; prev = it, it = it->next) {
		if (it != w)
			continue;
		if (prev)
			prev->next = w->next;
		else
			loop->inbox_head = w->next;
		if (loop->inbox_tail == w)
			loop->inbox_tail = prev;
		w->next = NULL;
		found = true;
		break;
	}
	pthread_mutex_unlock(&loop->post_lock);
	return found;
}

bool bs_loop_cancel_work(struct bs_loop *loop, struct bs_work *w)
{
	struct bs_work *prev = NULL, *it;

	if (inbox_cancel(loop, w))
		return true;
	for (it = loop->dq_head; it; prev = it, it = it->next) {
		if (it != w)
			continue;
		if (prev)
			prev->next = w->next;
		else
			loop->dq_head = w->next;
		if (loop->dq_tail == w)
			loop->dq_tail = prev;
		w->next = NULL;
		loop->dq_len--;
		return true;
	}
	return false;
}

int bs_loop_post(struct bs_loop *loop, bs_fn fn, void *arg)
{
	struct posted *p = malloc(sizeof(*p)), **pp;
	uint64_t one = 1;

	if (!p)
		return -ENOMEM;
	p->fn = fn;
	p->arg = arg;
	p->next = NULL;
	pthread_mutex_lock(&loop->post_lock);
	for (pp = &loop->posted; *pp; pp = &(*pp)->next)
		;
	*pp = p;
	pthread_mutex_unlock(&loop->post_lock);
	if (write(loop->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return -errno;
	return 0;
}

static void wake(struct bs_loop *loop)
{
	uint64_t one = 1;

	if (write(loop->evfd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is full, the loop is awake anyway */
	}
}

void bs_loop_send(struct bs_loop *loop, struct bs_work *w)
{
	bool first;

	if (tls_loop == loop) {
		bs_loop_defer(loop, w);
		return;
	}
	w->next = NULL;
	pthread_mutex_lock(&loop->post_lock);
	first = !loop->inbox_head;
	if (loop->inbox_tail)
		loop->inbox_tail->next = w;
	else
		loop->inbox_head = w;
	loop->inbox_tail = w;
	pthread_mutex_unlock(&loop->post_lock);
	/* one wake-up per batch: the loop takes the whole inbox at once */
	if (first)
		wake(loop);
}

int bs_loop_add_prepoll(struct bs_loop *loop, bs_fn fn, void *arg)
{
	struct prepoll *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->fn = fn;
	p->arg = arg;
	p->next = loop->prepolls;
	loop->prepolls = p;
	return 0;
}

void bs_loop_del_prepoll(struct bs_loop *loop, bs_fn fn, void *arg)
{
	struct prepoll **pp;

	for (pp = &loop->prepolls; *pp; pp = &(*pp)->next) {
		if ((*pp)->fn == fn && (*pp)->arg == arg) {
			struct prepoll *p = *pp;
			*pp = p->next;
			free(p);
			return;
		}
	}
}

int bs_loop_add_timer(struct bs_loop *loop, uint64_t ms, bs_fn fn, void *arg)
{
	struct timer *t = calloc(1, sizeof(*t)), **pp;

	if (!t)
		return -ENOMEM;
	t->id = loop->next_timer_id++;
	if (loop->next_timer_id <= 0)
		loop->next_timer_id = 1;
	t->due_ns = bs_now_ns() + ms * 1000000ull;
	t->fn = fn;
	t->arg = arg;
	for (pp = &loop->timers; *pp && (*pp)->due_ns <= t->due_ns;
	     pp = &(*pp)->next)
		;
	t->next = *pp;
	*pp = t;
	return t->id;
}

void bs_loop_cancel_timer(struct bs_loop *loop, int id)
{
	struct timer **pp;

	for (pp = &loop->timers; *pp; pp = &(*pp)->next) {
		if ((*pp)->id == id) {
			struct timer *t = *pp;
			*pp = t->next;
			free(t);
			return;
		}
	}
}

/* Rounds of deferred work and prepoll hooks before one epoll_wait. */
#define LOOP_ROUNDS 4

static bool run_deferred(struct bs_loop *loop)
{
	struct bs_work *w;
	bool ran = false;
	/*
	 * Only as many as were queued so far: new work waits for the next
	 * round (a count, not a pointer to the last item, so that work
	 * cancelled meanwhile cannot make the round unbounded).
	 */
	unsigned long n = loop->dq_len;

	while (n-- && (w = loop->dq_head)) {
		loop->dq_head = w->next;
		if (!loop->dq_head)
			loop->dq_tail = NULL;
		loop->dq_len--;
		w->next = NULL;
		w->fn(w->arg);
		ran = true;
	}
	return ran;
}

static void run_posted(struct bs_loop *loop)
{
	struct posted *list, *p;
	struct bs_work *w;
	uint64_t v;

	if (read(loop->evfd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing pending; other errors cannot happen */
	}
	pthread_mutex_lock(&loop->post_lock);
	list = loop->posted;
	loop->posted = NULL;
	/* sent work joins the deferred queue, in the order it was sent */
	if (loop->inbox_head) {
		if (loop->dq_tail)
			loop->dq_tail->next = loop->inbox_head;
		else
			loop->dq_head = loop->inbox_head;
		loop->dq_tail = loop->inbox_tail;
		for (w = loop->inbox_head; w; w = w->next)
			loop->dq_len++;
		loop->inbox_head = loop->inbox_tail = NULL;
	}
	pthread_mutex_unlock(&loop->post_lock);
	while ((p = list)) {
		list = p->next;
		p->fn(p->arg);
		free(p);
	}
}

static void run_timers(struct bs_loop *loop)
{
	uint64_t now = bs_now_ns();

	while (loop->timers && loop->timers->due_ns <= now) {
		struct timer *t = loop->timers;
		loop->timers = t->next;
		t->fn(t->arg);
		free(t);
	}
}

/*
 * Adaptive polling (as QEMU's event loop does): a loop whose events come
 * within poll_max_ns of blocking spins that long with epoll_wait(0)
 * before it blocks, so that a request at queue depth 1 does not pay for
 * waking a halted CPU. The spin grows (from 4 us, doubling) while events
 * would have been caught by a longer one, and shrinks (halving) when
 * the loop then blocked longer than poll_max_ns anyway: an idle loop
 * does not spin.
 */
#define LOOP_POLL_START_NS 4000u

void bs_loop_set_poll(struct bs_loop *loop, unsigned us)
{
	loop->poll_max_ns = (uint64_t)us * 1000;
	loop->poll_ns = 0;
}

uint64_t bs_loop_poll_ns(const struct bs_loop *loop)
{
	return loop->poll_ns;
}

static int loop_poll(struct bs_loop *loop, struct epoll_event *evs)
{
	uint64_t end = bs_now_ns() + loop->poll_ns;
	int n;

	do {
		n = epoll_wait(loop->epfd, evs, 64, 0);
		if (n)
			return n;
	} while (bs_now_ns() < end);
	return 0;
}

static void adapt(struct bs_loop *loop, bool got, uint64_t waited)
{
	if (got && waited <= loop->poll_max_ns) {
		/* a longer spin would have caught it */
		if (loop->poll_ns < waited)
			loop->poll_ns = loop->poll_ns ? loop->poll_ns * 2 :
							LOOP_POLL_START_NS;
		if (loop->poll_ns > loop->poll_max_ns)
			loop->poll_ns = loop->poll_max_ns;
	} else if (waited > loop->poll_max_ns) {
		loop->poll_ns /= 2;
		if (loop->poll_ns < LOOP_POLL_START_NS)
			loop->poll_ns = 0;
	}
}

/*
 * One iteration. @settle: the caller waits for a condition that work may
 * have met, so an iteration that ran work must not block (bs_loop_run_once
 * callers check their flag between iterations); bs_loop_run is woken by
 * bs_loop_stop() itself and blocks regardless, saving an epoll_wait(0)
 * per burst of work.
 */
static int run_once(struct bs_loop *loop, int timeout_ms, bool settle)
{
	struct epoll_event evs[64];
	struct prepoll *p, *pn;
	int n, i, round;
	bool ran = false;

	tls_loop = loop;
	__atomic_add_fetch(&loop->iterations, 1, __ATOMIC_SEQ_CST);
	/*
	 * Run work and the prepoll hooks (a driver's batched submission,
	 * which may complete at once) a few rounds while they queue more:
	 * one request's steps (parsed, submitted, completed, answered) then
	 * cost no epoll_wait(0) between them. Bounded, so that work which
	 * keeps queueing work cannot keep descriptors waiting.
	 */
	for (round = 0; round < LOOP_ROUNDS; round++) {
		ran |= run_deferred(loop);
		for (p = loop->prepolls; p; p = pn) {
			pn = p->next;
			p->fn(p->arg);
		}
		if (!loop->dq_head)
			break;
	}
	if ((settle && ran) || loop->dq_head)
		timeout_ms = 0;
	if (loop->timers) {
		uint64_t now = bs_now_ns(), due = loop->timers->due_ns;
		int t = due <= now ? 0 : (int)((due - now + 999999) / 1000000);
		if (timeout_ms < 0 || t < timeout_ms)
			timeout_ms = t;
	}
	if (loop->ring_on) {
		int err = ring_wait(loop, timeout_ms);

		if (err)
			return err;
		ring_reap(loop);
		run_timers(loop);
		return 0;
	}
	n = timeout_ms && loop->poll_ns ? loop_poll(loop, evs) : 0;
	if (!n) {
		uint64_t t0 = loop->poll_max_ns && timeout_ms ? bs_now_ns() : 0;

		if (timeout_ms)
			__atomic_store_n(&loop->idle, 1, __ATOMIC_SEQ_CST);
		n = epoll_wait(loop->epfd, evs, 64, timeout_ms);
		if (timeout_ms)
			__atomic_store_n(&loop->idle, 0, __ATOMIC_SEQ_CST);
		if (t0)
			adapt(loop, n > 0, bs_now_ns() - t0);
	}
	if (n < 0) {
		if (errno == EINTR)
			return 0;
		return -errno;
	}
	/*
	 * A callback may run the loop again (a sync wrapper inside a
	 * command): deleted watches are freed only by the outermost level,
	 * whose batch may still point at them.
	 */
	loop->depth++;
	for (i = 0; i < n; i++) {
		struct fd_watch *w = evs[i].data.ptr;

		if (!w) {
			run_posted(loop);
			continue;
		}
		/* a callback may have deleted a later watch of this batch */
		if (w->fn)
			w->fn(w->arg, evs[i].events);
	}
	loop->depth--;
	if (!loop->depth)
		free_dead(loop);
	run_timers(loop);
	return 0;
}

int bs_loop_run_once(struct bs_loop *loop, int timeout_ms)
{
	return run_once(loop, timeout_ms, true);
}

bool bs_loop_is_current(const struct bs_loop *loop)
{
	pthread_t owner;

	if (tls_loop == loop)
		return true;
	__atomic_load(&loop->owner, &owner, __ATOMIC_ACQUIRE);
	return pthread_equal(owner, pthread_self());
}

void bs_loop_set_owner(struct bs_loop *loop, pthread_t thread)
{
	__atomic_store(&loop->owner, &thread, __ATOMIC_RELEASE);
}

struct bs_loop *bs_loop_current(void)
{
	return tls_loop;
}

void bs_loop_set_current(struct bs_loop *loop)
{
	tls_loop = loop;
}

void bs_loop_set_index(struct bs_loop *loop, unsigned index)
{
	loop->index = index;
}

unsigned bs_loop_index(const struct bs_loop *loop)
{
	return loop->index;
}

uint64_t bs_loop_iterations(const struct bs_loop *loop)
{
	return __atomic_load_n(&loop->iterations, __ATOMIC_SEQ_CST);
}

bool bs_loop_idle(const struct bs_loop *loop)
{
	return __atomic_load_n(&loop->idle, __ATOMIC_SEQ_CST);
}

int bs_loop_run(struct bs_loop *loop)
{
	pthread_t self;
	int err = 0;

	/* a loop made by one thread may be run by another (I/O threads) */
	self = pthread_self();
	__atomic_store(&loop->owner, &self, __ATOMIC_RELEASE);
	tls_loop = loop;
	/* a stop asked before the run began counts (a thread starting late) */
	while (!__atomic_load_n(&loop->stop, __ATOMIC_SEQ_CST) && !err)
		err = run_once(loop, -1, false);
	/* consumed: the loop may be run again */
	__atomic_store_n(&loop->stop, false, __ATOMIC_SEQ_CST);
	return err;
}

void bs_loop_stop(struct bs_loop *loop)
{
	__atomic_store_n(&loop->stop, true, __ATOMIC_SEQ_CST);
	wake(loop);
}
