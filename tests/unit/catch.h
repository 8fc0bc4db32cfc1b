// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Catch2 2.x (Debian 12) or 3.x, whichever configure found.
#pragma once
#ifdef ROCE_CATCH2_V3
#include <catch2/catch_all.hpp>
#else
#include <catch2/catch.hpp>
#endif
