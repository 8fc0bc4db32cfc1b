// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// The btl's DataPath on its own: over a Device on FakeVerbs, with a host that
// records what the data path asks of the connection side (the whole module
// end to end is test_btl_e2e.cc).
#include <cerrno>
#include <string>
#include <vector>

#include "btl_device_bench.h"
#include "btl_roce_log.h"
#include "connection/retire.h"
#include "data/data_path.h"

using namespace roce;
using roce::testing::DeviceBench;
using util::Code;

namespace {

/// The Module's part, reduced to a record of the calls.
struct RecordingHost final : btl::DataPathHost {
    std::vector<std::string> calls;
    void path_failed(btl::Endpoint &, size_t i, const std::string &why) override {
        calls.push_back("path_failed " + std::to_string(i) + ": " + why);
    }
    void start_connect(btl::Endpoint &) override { calls.push_back("start_connect"); }
    void rc_message(btl::Endpoint &, size_t i) override {
        calls.push_back("rc_message " + std::to_string(i));
    }
    mca_btl_base_registration_handle_t *register_mem(void *, size_t, uint32_t) override {
        calls.push_back("register_mem");
        return nullptr;
    }
    util::Status deregister_mem(mca_btl_base_registration_handle_t *) override {
        calls.push_back("deregister_mem");
        return util::Status::ok();
    }
    int flush_progress() override {
        calls.push_back("progress");
        return 0;
    }
    bool can_carry(const btl::Endpoint &) override { return false; }
    void forwarded(btl::Endpoint &, const uint8_t *, size_t len) override {
        calls.push_back("forwarded " + std::to_string(len));
    }
    bool dc_unknown_sender(uint64_t name) override {
        calls.push_back("dc_unknown_sender " + std::to_string(name));
        return false;
    }
};

/// What the PML's callbacks saw.
struct PmlRecord {
    std::vector<int> send_done; ///< statuses
    std::vector<std::string> errors;
};
PmlRecord g_pml;

void on_send_done(mca_btl_base_module_t *, mca_btl_base_endpoint_t *, mca_btl_base_descriptor_t *,
                  int status) {
    g_pml.send_done.push_back(status);
}

void on_error(mca_btl_base_module_t *, int32_t, opal_proc_t *, char *info) {
    g_pml.errors.emplace_back(info != nullptr ? info : "");
}

/// A DataPath over a Device of the rxe_bond fixture, one endpoint with no
/// path yet; members in creation order.
struct DataPathBench {
    DeviceBench dev{"rxe_bond"};
    btl::Retirement retirement{dev.log};
    RecordingHost host;
    mca_btl_base_module_t btl{};
    opal_mutex_t lock;
    std::vector<std::unique_ptr<btl::Endpoint>> endpoints;
    std::unique_ptr<btl::DataPath> dp;

    DataPathBench() {
        OBJ_CONSTRUCT(&lock, opal_mutex_t);
        g_pml = PmlRecord{};
        btl.btl_max_send_size = 256;
        btl::PathChoice choice;
        choice.selection = dev.sel;
        endpoints.push_back(std::make_unique<btl::Endpoint>(64, nullptr, (uint64_t{7} << 32) | 1, 0,
                                                            btl::wire::PortAdvert{}, choice));
        btl::DataPathConfig cfg;
        cfg.max_rdma_ops = 8;
        auto d = btl::DataPath::create(
            host, *dev.dev, retirement, cfg, &btl, lock, endpoints, [] { return 0.0; }, dev.log);
        if (!d) {
            FAIL("DataPath::create: " << d.status().to_string());
        }
        dp = std::move(d.value());
        dp->set_error_cb(on_error);
    }
    ~DataPathBench() {
        dp.reset();
        endpoints.clear();
        OBJ_DESTRUCT(&lock);
    }
    btl::Endpoint &ep() { return *endpoints[0]; }
    /// Runs what the data path deferred, as Module::progress does.
    void run_deferred() {
        std::vector<btl::DataPath::Deferred> todo;
        dp->take_deferred(todo);
        dp->run_deferred(todo);
    }
};

/// The code a Status of the data path has, and what the C function table
/// answers for it; flow control carries no message (nothing formatted).
struct Answer {
    Code code;
    int opal;
    bool has_message;
    bool operator==(const Answer &o) const {
        return code == o.code && opal == o.opal && has_message == o.has_message;
    }
};
Answer answer(const util::Status &s) {
    return Answer{s.code(), btl::to_opal(s), !s.message().empty()};
}
const Answer kOk{Code::kOk, OPAL_SUCCESS, false};
const Answer kRetry{Code::kResourceExhausted, OPAL_ERR_OUT_OF_RESOURCE, false};
const Answer kUnreach{Code::kUnavailable, OPAL_ERR_UNREACH, true};
const Answer kBadParam{Code::kInvalidArgument, OPAL_ERR_BAD_PARAM, true};

} // namespace

namespace Catch {
template <>
struct StringMaker<Answer> {
    static std::string convert(const Answer &a) {
        return std::string(util::code_name(a.code)) + " -> " + std::to_string(a.opal) +
               (a.has_message ? ", with a message" : ", no message");
    }
};
} // namespace Catch

TEST_CASE("DataPath: work for a closed endpoint starts its connection", "[btl][datapath]") {
    DataPathBench b;
    REQUIRE(b.dp->max_inflight() == b.dev.dev->frags().size() + 8);

    // send queues the descriptor and asks the host to connect.
    mca_btl_base_descriptor_t *des = b.dp->alloc(&b.ep(), MCA_BTL_NO_ORDER, 100, 0);
    REQUIRE(des != nullptr);
    CHECK(answer(b.dp->send(&b.ep(), des, 0x41)) == kOk);
    CHECK(b.host.calls == std::vector<std::string>{"start_connect"});

    // sendi never queues: the PML falls back to a descriptor.
    char hdr[8] = {};
    mca_btl_base_descriptor_t *back = nullptr;
    CHECK(answer(b.dp->sendi(&b.ep(), nullptr, hdr, sizeof(hdr), 0, MCA_BTL_NO_ORDER, 0, 0x41,
                             &back)) == kRetry);
    CHECK(back == nullptr);

    // RDMA is refused until the endpoint is connected, and starts it too.
    mca_btl_base_registration_handle_t h{};
    h.rkey = 1;
    h.lkey = 2;
    uint64_t word = 0;
    CHECK(answer(b.dp->rdma(&b.ep(), true, &word, 0x1000, &h, &h, 8, nullptr, nullptr, nullptr)) ==
          kRetry);
    CHECK(b.host.calls.size() >= 2);
    CHECK(b.host.calls.back() == "start_connect");
    CHECK(b.dp->inflight() == 0); // nothing was posted
    CHECK(b.dp->nothing_deferred());
}

TEST_CASE("DataPath: a failed endpoint completes what waits with UNREACH and tells the PML",
          "[btl][datapath]") {
    DataPathBench b;
    mca_btl_base_descriptor_t *des = b.dp->alloc(&b.ep(), MCA_BTL_NO_ORDER, 32, 0);
    REQUIRE(des != nullptr);
    des->des_cbfunc = on_send_done;
    REQUIRE(answer(b.dp->send(&b.ep(), des, 0x41)) == kOk); // queued
    const size_t free_before = b.dev.dev->frags().free_count();

    b.ep().state = btl::EpState::kFailed; // as the connection manager sets it
    b.dp->fail_endpoint(b.ep(), "roce test:1: no reply");
    CHECK_FALSE(b.dp->nothing_deferred());
    b.run_deferred();
    CHECK(g_pml.send_done == std::vector<int>{OPAL_ERR_UNREACH});
    CHECK(g_pml.errors == std::vector<std::string>{"roce test:1: no reply"});
    CHECK(b.dp->nothing_deferred());
    // The PML owns the descriptor (no BTL_OWNERSHIP flag): it frees it.
    CHECK(b.dev.dev->frags().free_count() == free_before);
    CHECK(answer(b.dp->free_des(des)) == kOk);
    CHECK(b.dev.dev->frags().free_count() == free_before + 1);

    // From now on the endpoint answers at once.
    des = b.dp->alloc(&b.ep(), MCA_BTL_NO_ORDER, 32, 0);
    REQUIRE(des != nullptr);
    util::Status refused = b.dp->send(&b.ep(), des, 0x41);
    CHECK(answer(refused) == kUnreach);
    CHECK(refused.message().find(b.ep().label) != std::string::npos); // names the peer
    CHECK(answer(b.dp->free_des(des)) == kOk);
    mca_btl_base_registration_handle_t h{};
    h.rkey = 1;
    h.lkey = 2;
    uint64_t word = 0;
    CHECK(answer(b.dp->rdma(&b.ep(), false, &word, 0x1000, &h, &h, 8, nullptr, nullptr, nullptr)) ==
          kUnreach);
    CHECK(answer(b.dp->atomic(&b.ep(), &word, 0x1000, &h, &h, MCA_BTL_ATOMIC_ADD, 1, 0, false,
                              nullptr, nullptr, nullptr)) == kUnreach);
    for (const std::string &c : b.host.calls) {
        CHECK(c == "start_connect"); // the failed endpoint was never connected again
    }
}

TEST_CASE("DataPath: requests it cannot serve are refused before any state changes",
          "[btl][datapath]") {
    DataPathBench b;
    const size_t free_before = b.dev.dev->frags().free_count();
    // Larger than btl_max_send_size.
    CHECK(b.dp->alloc(&b.ep(), MCA_BTL_NO_ORDER, 257, 0) == nullptr);
    char hdr[300] = {};
    CHECK(answer(b.dp->sendi(&b.ep(), nullptr, hdr, sizeof(hdr), 0, MCA_BTL_NO_ORDER, 0, 0x41,
                             nullptr)) == kRetry);
    size_t size = 10;
    CHECK(b.dp->prepare_src(&b.ep(), nullptr, MCA_BTL_NO_ORDER, 257, &size, 0) == nullptr);
    // Verbs atomics are 64-bit add and compare-and-swap, on an aligned,
    // registered target.
    mca_btl_base_registration_handle_t h{};
    h.rkey = 1;
    h.lkey = 2;
    uint64_t word = 0;
    CHECK(answer(b.dp->atomic(&b.ep(), &word, 0x1000, &h, &h, MCA_BTL_ATOMIC_AND, 1, 0, false,
                              nullptr, nullptr, nullptr)) ==
          Answer{Code::kUnsupported, OPAL_ERR_NOT_SUPPORTED, true});
    CHECK(answer(b.dp->atomic(&b.ep(), &word, 0x1004, &h, &h, MCA_BTL_ATOMIC_ADD, 1, 0, false,
                              nullptr, nullptr, nullptr)) == kBadParam);
    // osc/rdma's routine probe for shared-memory windows: no message to format.
    CHECK(answer(b.dp->atomic(&b.ep(), &word, 0x1000, &h, nullptr, 0, 1, 0, true, nullptr, nullptr,
                              nullptr)) ==
          Answer{Code::kInvalidArgument, OPAL_ERR_BAD_PARAM, false});
    CHECK(answer(b.dp->rdma(nullptr, true, &word, 0x1000, &h, &h, 8, nullptr, nullptr, nullptr)) ==
          kBadParam);
    CHECK(answer(b.dp->rdma(&b.ep(), true, &word, 0x1000, &h, nullptr, 8, nullptr, nullptr,
                            nullptr)) == kBadParam);
    CHECK(b.host.calls.empty());
    CHECK(b.dev.dev->frags().free_count() == free_before);
    // Nothing outstanding: flush returns without progressing the host.
    CHECK(answer(b.dp->flush(nullptr)) == kOk);
    CHECK(answer(b.dp->flush(&b.ep())) == kOk);
    CHECK(b.host.calls.empty());
}

TEST_CASE("DataPath: creation fails with the pool's name when its memory cannot be registered",
          "[btl][datapath]") {
    DeviceBench dev("rxe_bond");
    btl::Retirement retirement(dev.log);
    RecordingHost host;
    mca_btl_base_module_t btl{};
    opal_mutex_t lock;
    OBJ_CONSTRUCT(&lock, opal_mutex_t);
    std::vector<std::unique_ptr<btl::Endpoint>> endpoints;
    dev.fake.fail(testing::Call::kRegMr, ENOMEM);
    auto d = btl::DataPath::create(
        host, *dev.dev, retirement, btl::DataPathConfig{}, &btl, lock, endpoints,
        [] { return 0.0; }, dev.log);
    REQUIRE_FALSE(d);
    CHECK(d.status().message().find("RDMA operation pool") != std::string::npos);
    OBJ_DESTRUCT(&lock);
}

TEST_CASE("DataPath: the deferred work's buffers circulate; progress allocates none once grown",
          "[btl][datapath]") {
    DataPathBench b;
    b.ep().state = btl::EpState::kFailed;
    // Each round is one progress call with work: something deferred (a short
    // error text: no string allocation), taken out under the lock and run.
    // The vectors taken out are kept alive, so a buffer that is not handed
    // back cannot be seen again.
    std::vector<std::vector<btl::DataPath::Deferred>> kept;
    std::vector<const void *> seen;
    for (int round = 0; round < 4; ++round) {
        b.dp->fail_endpoint(b.ep(), "down");
        kept.emplace_back();
        std::vector<btl::DataPath::Deferred> &todo = kept.back();
        b.dp->take_deferred(todo);
        REQUIRE(todo.size() == 1);
        seen.push_back(todo.data());
        b.dp->run_deferred(todo);
        CHECK(todo.capacity() == 0); // its buffer went back to the data path
        CHECK(b.dp->nothing_deferred());
    }
    CHECK(g_pml.errors == std::vector<std::string>(4, "down"));
    // Two buffers take turns: the one being run and the one filling.
    CHECK(seen[0] != seen[1]);
    CHECK(seen[2] == seen[0]);
    CHECK(seen[3] == seen[1]);

    // Nothing deferred: nothing changes hands.
    std::vector<btl::DataPath::Deferred> none;
    b.dp->take_deferred(none);
    CHECK(none.capacity() == 0);
}
