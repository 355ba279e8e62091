// dcache-bench's engine on its error paths, with libnfs contexts that never
// connect (RPCs queue on them, and are cancelled when they go): what a
// callback says when libnfs gives it no text, and what closing does with
// RPCs still in flight once the results they would count in are gone.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>

#include "engine.hpp"

namespace db = dcache::bench;

namespace {

// An engine with one connection whose context never connects.
struct offline_engine {
	db::engine e;
	std::unique_ptr<db::phase_result> res = std::make_unique<db::phase_result>();
	db::conn *c = nullptr;
	unsigned char handle[8] = {1, 2, 3, 4, 5, 6, 7, 8};

	offline_engine()
	{
		db::engine::self = &e;
		e.res = res.get();
		e.spec.nfs_version = 3;
		auto conn = std::make_unique<db::conn>();
		conn->nfs = nfs_init_context();
		conn->rpc = conn->nfs != nullptr ? nfs_get_rpc_context(conn->nfs) : nullptr;
		conn->fh3.data.data_len = sizeof(handle);
		conn->fh3.data.data_val = reinterpret_cast<char *>(handle);
		conn->stopped = true; // nothing issued but what the test issues
		c = conn.get();
		e.conns.push_back(std::move(conn));
	}
	offline_engine(const offline_engine &) = delete;
	offline_engine &operator=(const offline_engine &) = delete;
	~offline_engine() { db::engine::self = nullptr; }

	// An operation of one RPC in flight on c, as issue() leaves it.
	db::sub_rpc *one_rpc()
	{
		auto *op = new db::op_slot;
		op->c = c;
		op->pending = 1;
		op->len = 4096;
		op->start = db::clock_type::now();
		++c->inflight;
		return new db::sub_rpc{op, 0, 4096, {}};
	}
};

TEST(EngineErrors, LibnfsTextIsNeverNull)
{
	EXPECT_STREQ(db::libnfs_text(nullptr), "no error text from libnfs");
	EXPECT_STREQ(db::libnfs_text(""), "no error text from libnfs");
	EXPECT_STREQ(db::libnfs_text("Socket failed with POLLHUP"), "Socket failed with POLLHUP");
}

// A raw WRITE or COMMIT that failed without data on a context that has had
// no error (rpc_get_error() is NULL): counted with a text, no crash.
TEST(EngineErrors, RawCallbacksWithoutErrorTextAreCountedNotCrashed)
{
	offline_engine t;
	ASSERT_NE(t.c->rpc, nullptr);
	ASSERT_EQ(rpc_get_error(t.c->rpc), nullptr) << "a fresh context has no error text";
	db::engine::on_write3(t.c->rpc, RPC_STATUS_TIMEOUT, nullptr, t.one_rpc());
	EXPECT_EQ(t.res->errors, 1u);
	EXPECT_EQ(t.res->first_error, "WRITE RPC failed: no error text from libnfs");
	EXPECT_EQ(t.c->inflight, 0u);
	t.c->commit_inflight = true;
	db::engine::on_commit3(t.c->rpc, RPC_STATUS_ERROR, nullptr, t.c);
	EXPECT_EQ(t.res->errors, 2u);
	EXPECT_FALSE(t.c->commit_inflight);
	// a high-level callback with neither data nor a context message
	db::engine::on_read(-EINTR, t.c->nfs, nullptr, t.one_rpc());
	EXPECT_EQ(t.res->errors, 3u);
	EXPECT_EQ(t.res->write_ops + t.res->read_ops, 0u);
}

// The run is over (a fatal error, say, with WRITEs and a COMMIT in flight)
// and main's results are gone before the engine: closing cancels every RPC
// still queued, and their callbacks give back what they hold and count
// nothing (under ASan: no use after free, no leak).
TEST(EngineErrors, ClosingWithRpcsInFlightTouchesNoResults)
{
	offline_engine t;
	t.e.issue(*t.c, false, 0, 8192);
	t.e.issue(*t.c, false, 8192, 8192);
	ASSERT_EQ(t.e.res->errors, 0u) << t.e.res->first_error;
	ASSERT_EQ(t.c->inflight, 2u) << "two WRITEs queued on a context that never connected";
	t.e.send_commit(*t.c);
	ASSERT_TRUE(t.c->commit_inflight);
	t.res.reset(); // main's phase_result, gone first
	t.e.close_all();
	EXPECT_TRUE(t.e.conns.empty());
	EXPECT_TRUE(t.e.closing);
	t.e.close_all(); // again: nothing left to do
}

} // namespace
