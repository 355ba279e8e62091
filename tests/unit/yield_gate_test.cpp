// The gate auto's streams wait at (Auto_Stream_Yield_Ms, yield_gate.h): a
// stream's request waits while the requests it gives way to are in flight
// and for the quiet time after the last of them, never past its deadline.
#include "yield_gate.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>
#include <vector>

using dcache::core::yield_gate;
using namespace std::chrono_literals;

namespace {

using clock_type = yield_gate::clock;

TEST(yield_gate, an_idle_gate_lets_a_stream_through_at_once)
{
	yield_gate g;
	EXPECT_EQ(g.wait(2ms, clock_type::now() + 1s, 0ms), clock_type::duration::zero());
}

TEST(yield_gate, a_stream_waits_until_the_last_request_left_and_the_quiet_time)
{
	yield_gate g;
	g.enter();
	g.enter();
	const auto start = clock_type::now();
	auto waited = std::async(std::launch::async, [&] { return g.wait(20ms, clock_type::now() + 5s, 0ms); });
	std::this_thread::sleep_for(30ms);
	g.leave();
	EXPECT_EQ(waited.wait_for(30ms), std::future_status::timeout) << "one is still in flight";
	g.leave();
	const auto left = clock_type::now();
	const clock_type::duration w = waited.get();
	EXPECT_GE(clock_type::now() - left, 20ms) << "the quiet time after the last one";
	EXPECT_GE(w, 60ms);
	EXPECT_LT(clock_type::now() - start, 4s) << "woken by the leave, not by the deadline";
	EXPECT_EQ(g.in_flight(), 0u);
}

TEST(yield_gate, a_request_in_the_quiet_time_keeps_the_stream_waiting)
{
	yield_gate g;
	g.enter();
	g.leave();
	auto waited = std::async(std::launch::async, [&] { return g.wait(50ms, clock_type::now() + 5s, 0ms); });
	std::this_thread::sleep_for(20ms);
	g.enter();
	std::this_thread::sleep_for(100ms);
	EXPECT_EQ(waited.wait_for(0ms), std::future_status::timeout);
	g.leave();
	EXPECT_GE(waited.get(), 150ms);
}

TEST(yield_gate, a_stream_never_waits_past_its_deadline)
{
	yield_gate g;
	g.enter();
	const clock_type::duration w = g.wait(2ms, clock_type::now() + 40ms, 0ms);
	EXPECT_GE(w, 40ms);
	EXPECT_LT(w, 2s);
	EXPECT_EQ(g.wait(2ms, clock_type::now(), 0ms), clock_type::duration::zero()) << "a deadline already past";
	g.leave();
}

// A stream leaves out the requests counted as its own file's (the start
// of its runs): in flight, or the last to leave.
TEST(yield_gate, a_stream_leaves_out_its_own_file_s_requests)
{
	yield_gate g;
	dcache::core::yield_own mine, other;
	g.enter(&mine);
	EXPECT_TRUE(g.busy(clock_type::now(), 20ms)) << "to any other stream";
	EXPECT_FALSE(g.busy(clock_type::now(), 20ms, &mine));
	EXPECT_EQ(g.wait(20ms, clock_type::now() + 1s, 0ms, &mine), clock_type::duration::zero())
		<< "only its own file's request in flight";
	g.leave(&mine);
	EXPECT_TRUE(g.busy(clock_type::now(), 1s)) << "the quiet time after it, to any other stream";
	EXPECT_EQ(g.wait(20ms, clock_type::now() + 1s, 0ms, &mine), clock_type::duration::zero())
		<< "its own file's request left last";
	g.enter(&other);
	g.enter(&mine);
	EXPECT_GE(g.wait(2ms, clock_type::now() + 30ms, 0ms, &mine), 25ms) << "another file's request in flight";
	g.leave(&other);
	g.leave(&mine);
	EXPECT_EQ(mine.in.load(), 0);
	EXPECT_EQ(other.in.load(), 0);
	EXPECT_EQ(g.in_flight(), 0u);
}

// The stream's own run start leaving after another request does not hide
// that one from it: four writers beside random readers that never stop
// had the open gate close whenever a writer's file began a run again,
// and waited 288 times in 20 s, 500 ms each.
TEST(yield_gate, the_own_file_s_run_start_leaving_last_hides_no_other_request)
{
	yield_gate g;
	dcache::core::yield_own mine;
	g.enter(); // a reader
	EXPECT_GE(g.wait(2ms, clock_type::now() + 20ms, 1s, &mine), 15ms);
	ASSERT_TRUE(g.open());
	g.leave();
	g.enter(&mine);
	g.leave(&mine);
	EXPECT_TRUE(g.busy(clock_type::now(), 1s, &mine)) << "the reader left less than a second ago";
	EXPECT_EQ(g.wait(2ms, clock_type::now() + 1s, 1s, &mine), clock_type::duration::zero());
	EXPECT_TRUE(g.open()) << "closed by a pause that was not one";
}

// ... nor another file's run start that left just before it.
TEST(yield_gate, the_own_file_s_run_start_leaving_last_hides_no_other_file_s)
{
	yield_gate g;
	dcache::core::yield_own mine, other;
	g.enter(&other);
	g.leave(&other);
	g.enter(&mine);
	g.leave(&mine);
	g.enter(&mine);
	g.leave(&mine);
	EXPECT_TRUE(g.busy(clock_type::now(), 1s, &mine)) << "the other file's run start left less than a second ago";
	EXPECT_TRUE(g.busy(clock_type::now(), 1s, &other)) << "and this one's, to the other file's stream";
	std::this_thread::sleep_for(30ms);
	EXPECT_FALSE(g.busy(clock_type::now(), 20ms, &mine));
}

// No more than k_yield_max_waiting workers wait at once: the next stream
// request goes on at once.
TEST(yield_gate, no_more_than_the_bound_wait_at_once)
{
	yield_gate g;
	g.enter();
	std::vector<std::future<clock_type::duration>> waiting;
	for (std::uint32_t i = 0; i < dcache::core::k_yield_max_waiting; ++i)
		waiting.push_back(
			std::async(std::launch::async, [&] { return g.wait(2ms, clock_type::now() + 5s, 0ms); }));
	for (const auto until = clock_type::now() + 10s;
	     g.waiting() < dcache::core::k_yield_max_waiting && clock_type::now() < until;)
		std::this_thread::sleep_for(1ms);
	ASSERT_EQ(g.waiting(), dcache::core::k_yield_max_waiting);
	std::this_thread::sleep_for(100ms);
	EXPECT_EQ(g.wait(2ms, clock_type::now() + 5s, 0ms), clock_type::duration::zero()) << "one over the bound";
	g.leave();
	for (auto &w : waiting)
		EXPECT_GE(w.get(), 100ms);
}

// Requests that keep coming past a stream's deadline gain nothing from
// its waiting: the gate opens until the export has gone the reopen time
// without one.
TEST(yield_gate, a_wait_that_meets_its_deadline_opens_the_gate_until_a_long_pause)
{
	yield_gate g;
	g.enter();
	EXPECT_GE(g.wait(2ms, clock_type::now() + 30ms, 60ms), 30ms);
	EXPECT_TRUE(g.open());
	EXPECT_EQ(g.wait(2ms, clock_type::now() + 1s, 60ms), clock_type::duration::zero()) << "open: no stream waits";
	g.leave();
	std::this_thread::sleep_for(80ms);
	EXPECT_EQ(g.wait(2ms, clock_type::now() + 1s, 60ms), clock_type::duration::zero());
	EXPECT_FALSE(g.open()) << "closed by the long pause";
	g.enter();
	EXPECT_GE(g.wait(2ms, clock_type::now() + 30ms, 60ms), 30ms) << "the next burst is given way again";
	g.leave();
}

// Readers that never stop pause now and then for longer than the quiet
// time; the gate they opened stays open through such pauses, so a stream
// beside them does not wait again and again.
TEST(yield_gate, a_pause_shorter_than_the_reopen_time_leaves_the_gate_open)
{
	yield_gate g;
	g.enter();
	EXPECT_GE(g.wait(2ms, clock_type::now() + 20ms, 1s), 20ms);
	ASSERT_TRUE(g.open());
	for (int i = 0; i < 3; ++i) {
		g.leave();
		std::this_thread::sleep_for(15ms); // longer than the quiet time
		EXPECT_EQ(g.wait(2ms, clock_type::now() + 1s, 1s), clock_type::duration::zero())
			<< "pause " << i << ": the gate closed";
		EXPECT_TRUE(g.open());
		g.enter();
	}
	g.leave();
}

} // namespace
