#pragma once
// A bound on JSON nesting, checked before any parser recurses: every JSON body a listener takes and every
// object read from the Kubernetes API goes through CheckJsonDepth first, so a body nested 200,000 deep is a
// clear error, not a stack overflow. One linear scan, no recursion, no allocation.

#include <string_view>

#include "base/status.h"

namespace tessera {

// The deepest nesting Tessera accepts in a JSON document (arrays and objects together). Real requests nest
// fewer than 20 levels; Kubernetes objects (pods, nodes) about 10.
inline constexpr int kMaxJsonDepth = 64;

// The deepest nesting of arrays and objects in `text`, brackets inside strings not counted; stops counting
// (and returns) once `stop_at` is passed. Malformed text is scanned as it comes: the parser judges it.
int JsonNestingDepth(std::string_view text, int stop_at = kMaxJsonDepth + 1);

// Ok, or an error naming the limit ("JSON nested deeper than 64 levels (the limit)").
Status CheckJsonDepth(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace tessera
