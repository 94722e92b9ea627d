// shim: removed when the dispatch split lands (dispatch.cpp and defaults.cpp include this path).
#pragma once
#include "lib/core/element.hpp"
