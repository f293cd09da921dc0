// The trace keeps spans up to its bound and counts the rest; threads that
// recorded spans keep their names.
#include "sluice/exec/trace_buffer.h"

#include <thread>

#include "gtest/gtest.h"

namespace sluice::exec {
namespace {

TEST(TraceBuffer, PastItsBoundSpansAreCountedNotKept) {
  TraceBuffer trace(2);
  trace.Span("op", "a", 1, 2);
  trace.Span("op", "b", 2, 3);
  trace.Span("node", "c", 3, 4);
  ASSERT_EQ(trace.spans().size(), 2u);
  EXPECT_EQ(trace.spans()[1].name, "b");
  EXPECT_EQ(trace.spans()[1].thread, TraceBuffer::ThreadId());
  EXPECT_EQ(trace.dropped(), 1);
}

TEST(TraceBuffer, AThreadThatRecordedKeepsItsNameAfterItEnds) {
  TraceBuffer trace;
  int id = 0;
  std::thread t([&] {
    TraceBuffer::NameThread("map w2/blur");
    id = TraceBuffer::ThreadId();
    trace.Span("op", "gaussian_blur", 5, 9);
  });
  t.join();
  ASSERT_EQ(trace.thread_names().count(id), 1u);
  EXPECT_EQ(trace.thread_names().at(id), "map w2/blur");
}

}  // namespace
}  // namespace sluice::exec
