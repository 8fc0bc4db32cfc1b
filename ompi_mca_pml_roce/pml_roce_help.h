// Copyright (c) 2026 ompi-roce developers. See LICENSE.
//
// User-facing errors of the pml, through Open MPI's show_help so that
// mpirun aggregates the same message from many ranks.
#pragma once

namespace roce::pml {

/// Shows `detail` (printf format; by convention it starts with "error: " or
/// "fatal: ") under `topic`, a section of help-mpi-pml-roce.txt taking the
/// host name and the detail line. Through opal_show_help when the help file
/// is installed (mpirun then prints each topic once and counts the other
/// processes that sent it); otherwise - run from the build tree - as the
/// single line "pml roce [HOST]: DETAIL" on stderr. Thread-safe; never
/// throws; may be called with pml locks held (opal_show_help does not
/// progress the BTLs).
void report(const char *topic, const char *detail, ...) noexcept
    __attribute__((format(printf, 2, 3)));

/// Like report(), but always the single line "pml roce [HOST]: DETAIL" on
/// stderr, never through show_help: for errors the process exits right
/// after (an invalid parameter of the selected pml fails MPI_Init). Open MPI
/// 4.1.4 relays a rank's help message to mpirun asynchronously and loses it
/// when the rank exits first (mpirun prints "ORTE_ERROR_LOG: Data unpack
/// would read past end of buffer in file .../show_help.c" instead: 5 of 5
/// runs at np 1 here). Thread-safe; never throws.
void report_before_exit(const char *detail, ...) noexcept __attribute__((format(printf, 1, 2)));

/// The fatal error that ends the job: report_before_exit's line (the
/// process aborts right after, and mpirun also loses help messages of the
/// ranks on its own node), then the "fatal" topic's explanation through
/// opal_show_help when the help file is installed. Thread-safe; never
/// throws.
void report_fatal(const char *detail, ...) noexcept __attribute__((format(printf, 1, 2)));

} // namespace roce::pml
