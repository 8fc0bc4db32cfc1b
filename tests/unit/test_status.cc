// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#include <cerrno>
#include <string>
#include <utility>

#include "catch.h"
#include "util/status.h"

using roce::util::Code;
using roce::util::Result;
using roce::util::Status;

TEST_CASE("Status: default is ok and carries nothing", "[util][status]") {
    Status s;
    CHECK(s.is_ok());
    CHECK(static_cast<bool>(s));
    CHECK(s.code() == Code::kOk);
    CHECK(s.sys_errno() == 0);
    CHECK(s.message().empty());
    CHECK(s.to_string() == "ok");
}

TEST_CASE("Status: from_errno keeps the errno and names the call", "[util][status]") {
    Status s = Status::from_errno(EPERM, "ibv_modify_qp(UD, RESET->INIT)");
    CHECK_FALSE(s.is_ok());
    CHECK(s.code() == Code::kPermissionDenied);
    CHECK(s.sys_errno() == EPERM);
    CHECK(s.message() == "ibv_modify_qp(UD, RESET->INIT) failed: Operation not permitted (1)");
    CHECK(s.to_string() ==
          "ibv_modify_qp(UD, RESET->INIT) failed: Operation not permitted (1) "
          "[permission denied]");
}

TEST_CASE("Status: errno classes map to codes", "[util][status]") {
    CHECK(roce::util::code_from_errno(EINVAL) == Code::kInvalidArgument);
    CHECK(roce::util::code_from_errno(ENODATA) == Code::kNotFound);
    CHECK(roce::util::code_from_errno(EACCES) == Code::kPermissionDenied);
    CHECK(roce::util::code_from_errno(ENOMEM) == Code::kResourceExhausted);
    CHECK(roce::util::code_from_errno(ETIMEDOUT) == Code::kTimeout);
    CHECK(roce::util::code_from_errno(EOPNOTSUPP) == Code::kUnsupported);
    CHECK(roce::util::code_from_errno(ENETDOWN) == Code::kUnavailable);
    CHECK(roce::util::code_from_errno(EPROTO) == Code::kProtocol);
    // errno 0 from a failed call must still be an error.
    Status s = Status::from_errno(0, "weird");
    CHECK_FALSE(s.is_ok());
    CHECK(s.code() == Code::kInternal);
}

TEST_CASE("Status: context is prepended, outermost first", "[util][status]") {
    Status s(Code::kNotFound, "gid[7] is empty");
    s.with_context("rxe_bond0:1").with_context("RC INIT->RTR");
    CHECK(s.message() == "RC INIT->RTR: rxe_bond0:1: gid[7] is empty");
    CHECK(s.code() == Code::kNotFound);

    Status ok;
    ok.with_context("ignored");
    CHECK(ok.is_ok());
    CHECK(ok.message().empty());

    Status moved = Status(Code::kTimeout, "no reply").with_context("handshake with rank 3");
    CHECK(moved.message() == "handshake with rank 3: no reply");
}

TEST_CASE("Status: an error without a message is a code and nothing else; copies are deep",
          "[util][status]") {
    // Flow control (the btl's retry_later()) and ok cost no string: the
    // message and errno live behind a pointer that is null for them.
    CHECK(sizeof(Status) <= 2 * sizeof(void *));
    Status retry(Code::kResourceExhausted, std::string());
    CHECK_FALSE(retry.is_ok());
    CHECK_FALSE(retry.has_message());
    CHECK(retry.message().empty());
    CHECK(retry.sys_errno() == 0);
    CHECK(retry.to_string() == " [resource exhausted]");
    // Context on an error without a message gives it one.
    retry.with_context("send to rank 1");
    CHECK(retry.has_message());
    CHECK(retry.message() == "send to rank 1: ");

    // An errno alone is kept, without a message.
    Status bare(Code::kUnavailable, std::string(), EIO);
    CHECK(bare.sys_errno() == EIO);
    CHECK_FALSE(bare.has_message());

    Status a = Status::from_errno(EBUSY, "ibv_destroy_cq");
    Status b = a; // a copy of its own
    b.with_context("teardown");
    CHECK(a.message() == "ibv_destroy_cq failed: Device or resource busy (16)");
    CHECK(b.message() == "teardown: ibv_destroy_cq failed: Device or resource busy (16)");
    CHECK(b.sys_errno() == EBUSY);
    Status c;
    c = b;
    c = *&c; // self-assignment keeps it
    CHECK(c.message() == b.message());
    CHECK(c.code() == Code::kUnavailable);
    c = Status::ok();
    CHECK(c.is_ok());
    CHECK_FALSE(c.has_message());
    CHECK(c.sys_errno() == 0);
    Status d = std::move(b);
    CHECK(d.message() == "teardown: ibv_destroy_cq failed: Device or resource busy (16)");
    CHECK(d.sys_errno() == EBUSY);
}

TEST_CASE("Result: holds a value or the error", "[util][status]") {
    Result<int> good(42);
    REQUIRE(good.is_ok());
    CHECK(*good == 42);
    CHECK(good.status().is_ok());

    Result<int> bad(Status(Code::kInvalidArgument, "nope"));
    CHECK_FALSE(bad.is_ok());
    CHECK(bad.status().code() == Code::kInvalidArgument);
    CHECK(bad.status().message() == "nope");

    Result<std::string> str(std::string("abc"));
    CHECK(str->size() == 3);
    std::string taken = std::move(str).value();
    CHECK(taken == "abc");
}

TEST_CASE("a path naming the wrong kind of thing is bad input, not an internal error",
          "[util][status]") {
    // Found by the capture fuzz target: a capture with a file where
    // sys/class/net belongs read as "internal error" (ENOTDIR).
    for (int err : {ENOTDIR, EISDIR, ELOOP, ENAMETOOLONG}) {
        INFO(err);
        CHECK(roce::util::code_from_errno(err) == Code::kInvalidArgument);
    }
}
