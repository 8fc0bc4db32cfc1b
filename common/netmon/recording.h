// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "netmon/event.h"
#include "netmon/model.h"
#include "util/status.h"

namespace roce::netmon {

/// A recording of rtnetlink traffic: one datagram per line as lower-case
/// hex, exactly the bytes recvmsg returned; lines starting with '#' are
/// comments (what was done to the system at that point). Written by
/// contrib/netmon-watch --record, replayed by unit tests and by
/// netmon-watch --replay.
using Datagram = std::vector<uint8_t>;

std::string to_hex_line(const uint8_t *data, size_t len);
util::Result<Datagram> from_hex_line(const std::string &line);

/// Reads a recording; errors name the file and line.
util::Result<std::vector<Datagram>> read_recording(const std::string &path);

/// Feeds recorded datagrams through parse_message() and `model`; returns the
/// events in order (seq numbered from 1). Malformed messages are an error.
util::Result<std::vector<Event>> replay(Model &model, const std::vector<Datagram> &datagrams);

} // namespace roce::netmon
