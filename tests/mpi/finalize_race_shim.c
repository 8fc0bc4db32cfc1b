/* LD_PRELOAD shim for tests/mpi/finalize-race: widens a race in Open MPI
 * 4.1's MPI_Finalize on purpose, so that a crash the soak met a few times in
 * thousands of runs happens every time.
 *
 * Open MPI 4.1's PMIx glue (mca_pmix_ext3x.so) does not process a PMIx event
 * notification on the PMIx thread: it "thread-shifts" it, assigning a
 * libevent callback (its static process_event) to the OPAL async thread's
 * event base. Every rank gets such a notification (PMIX_MODEL_DECLARED, -147)
 * while it finalizes. This shim wraps each libevent callback that
 * mca_pmix_ext3x.so assigns so that it runs FINALIZE_RACE_DELAY_MS (default
 * 2000) later than it would, and says on stderr whether the callback's code
 * is still mapped when it is finally called. Nothing else changes. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct event;
struct event_base;
typedef void (*event_cb)(int, short, void *);

struct held {
    event_cb cb;
    void *arg;
};

static void say(const char *what, event_cb cb) {
    char line[256];
    Dl_info di;
    const char *lib = dladdr((void *)cb, &di) && di.dli_fname != NULL
                          ? di.dli_fname
                          : "no library maps it any more";
    int n = snprintf(line, sizeof line, "finalize-race[%d]: %s callback %p (%s)\n", (int)getpid(),
                     what, (void *)cb, lib);
    if (n > 0) {
        (void)!write(2, line, (size_t)n);
    }
}

static void held_callback(int fd, short what, void *p) {
    struct held *h = p;
    const char *env = getenv("FINALIZE_RACE_DELAY_MS");
    long ms = env != NULL ? atol(env) : 2000;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    say("holding", h->cb);
    nanosleep(&ts, NULL);
    say("calling", h->cb);
    h->cb(fd, what, h->arg); /* as libevent would have, only later */
}

int event_assign(struct event *ev, struct event_base *base, int fd, short events, event_cb cb,
                 void *arg) {
    static int (*real)(struct event *, struct event_base *, int, short, event_cb, void *);
    Dl_info di;
    if (real == NULL) {
        *(void **)&real = dlsym(RTLD_NEXT, "event_assign");
    }
    if (cb != NULL && dladdr((void *)cb, &di) && di.dli_fname != NULL &&
        strstr(di.dli_fname, "mca_pmix_ext3x") != NULL) {
        struct held *h = malloc(sizeof *h); /* one per notification, never freed: a test shim */
        if (h != NULL) {
            h->cb = cb;
            h->arg = arg;
            return real(ev, base, fd, events, held_callback, h);
        }
    }
    return real(ev, base, fd, events, cb, arg);
}
