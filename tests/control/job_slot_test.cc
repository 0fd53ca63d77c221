// JobSlot is a type of its own: no integer converts into it or out of it without saying so, and EngineId /
// SlotOf are the one conversion to and from the scheduler's request ids.
#include "control/job_slot.h"

#include <gtest/gtest.h>

#include <limits>
#include <sstream>
#include <type_traits>

namespace tessera {
namespace {

static_assert(!std::is_convertible_v<int32_t, JobSlot>);
static_assert(!std::is_convertible_v<JobId, JobSlot>);
static_assert(!std::is_convertible_v<JobSlot, int32_t>);
static_assert(!std::is_convertible_v<JobSlot, JobId>);
static_assert(std::is_trivially_copyable_v<JobSlot> && sizeof(JobSlot) == sizeof(int32_t));

TEST(JobSlot, DefaultsToNoSlotAndComparesByIndex) {
  EXPECT_EQ(JobSlot(), kNoSlot);
  EXPECT_EQ(kNoSlot.value(), -1);
  EXPECT_EQ(JobSlot(3).value(), 3);
  EXPECT_LT(JobSlot(2), JobSlot(3));
  EXPECT_NE(JobSlot(2), JobSlot(3));
  std::ostringstream os;
  os << JobSlot(7);
  EXPECT_EQ(os.str(), "7");
}

TEST(JobSlot, EngineIdAndSlotOfAreInverse) {
  for (int32_t i : {0, 1, 41, std::numeric_limits<int32_t>::max()}) {
    EXPECT_EQ(EngineId(JobSlot(i)), JobId{i});
    EXPECT_EQ(SlotOf(EngineId(JobSlot(i))), JobSlot(i));
  }
  // Ids EngineId never gives name no slot.
  EXPECT_EQ(SlotOf(-1), kNoSlot);
  EXPECT_EQ(SlotOf(-5), kNoSlot);
  EXPECT_EQ(SlotOf(JobId{std::numeric_limits<int32_t>::max()} + 1), kNoSlot);
}

}  // namespace
}  // namespace tessera
