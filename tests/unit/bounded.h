// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Runs a piece of code in a forked child with a deadline, so that a test of
// "this must not hang" fails cleanly (and names the hang) instead of hanging
// the whole `make check`.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <functional>
#include <string>

namespace roce::testing {

/// What a bounded run did.
struct BoundedRun {
    bool finished = false; ///< false: still running at the deadline, killed
    double seconds = 0;    ///< wall time until the child finished or was killed
    int exit_code = -1;    ///< the child's exit status (fn's return value)
    std::string output;    ///< what fn wrote into its string argument
};

/// Runs fn(out) in a child process; the child's return value becomes its exit
/// status and `out` is sent back through a pipe. Kills the child (SIGKILL)
/// when it has not finished after `timeout_s`. fn must not use Catch2
/// assertions (they would be lost in the child): return what to check.
inline BoundedRun run_bounded(const std::function<int(std::string &out)> &fn, double timeout_s) {
    BoundedRun r;
    int fds[2];
    if (::pipe(fds) != 0) {
        r.output = "pipe failed";
        return r;
    }
    auto start = std::chrono::steady_clock::now();
    pid_t pid = ::fork();
    if (pid < 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        r.output = "fork failed";
        return r;
    }
    if (pid == 0) {
        ::close(fds[0]);
        std::string out;
        int rc = 0;
        try {
            rc = fn(out);
        } catch (...) {
            out += "exception";
            rc = 125;
        }
        for (size_t done = 0; done < out.size();) {
            ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
            if (n <= 0) {
                break;
            }
            done += static_cast<size_t>(n);
        }
        ::_exit(rc & 0xff);
    }
    ::close(fds[1]);
    auto deadline = start + std::chrono::duration<double>(timeout_s);
    char buf[4096];
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            break;
        }
        pollfd p{fds[0], POLLIN, 0};
        int rc = ::poll(&p, 1, static_cast<int>(left.count()));
        if (rc <= 0) {
            continue; // timeout (loop ends) or EINTR
        }
        ssize_t n = ::read(fds[0], buf, sizeof(buf));
        if (n <= 0) {
            r.finished = true; // EOF: the child exited (or closed the pipe)
            break;
        }
        r.output.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    if (!r.finished) {
        ::kill(pid, SIGKILL);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r.finished && WIFEXITED(status)) {
        r.exit_code = WEXITSTATUS(status);
    } else if (r.finished) {
        r.exit_code = 128 + WTERMSIG(status);
    }
    return r;
}

/// CPU time of the calling thread, in seconds: for bounds on how much work
/// something does, which other processes on a loaded machine cannot
/// stretch the way they stretch wall time.
inline double thread_cpu_seconds() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// How much slower than a plain -O2 build this one is expected to run:
/// sanitizers cost 3-5x, so time bounds in tests scale with this.
constexpr double kSlowdown =
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    5.0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(undefined_behavior_sanitizer)
    5.0;
#else
    1.0;
#endif
#else
    1.0;
#endif

} // namespace roce::testing
