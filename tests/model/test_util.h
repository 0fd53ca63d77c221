#pragma once
// Helpers shared by the model tests.
#include <gtest/gtest.h>

#include <string>

#include "model/catalog.h"

namespace tessera::testing {

// The default catalog's kind `id`; an unknown id fails the test that asked (and yields the first kind).
inline const GpuKind& Kind(const std::string& id) {
  const KindId k = Catalog::Default().Find(id);
  EXPECT_NE(k, kNone) << id;
  return Catalog::Default().kind(k == kNone ? 0 : k);
}

}  // namespace tessera::testing
