// Copyright (c) 2026 ompi-roce developers. See LICENSE.
// Catch2 3 brings its own main (Catch2Main); Catch2 2 needs this one.
#ifndef ROCE_CATCH2_V3
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
