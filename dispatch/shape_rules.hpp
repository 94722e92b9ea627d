// shim: removed when the dispatch split lands (the rules are lib/core/shape_rules.hpp's).
#pragma once
#include "dispatch/validate.hpp"
#include "lib/core/shape_rules.hpp"
