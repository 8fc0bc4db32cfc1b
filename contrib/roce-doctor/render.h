// Copyright (c) 2026 ompi-roce developers. See LICENSE.
#pragma once

#include <string>
#include <vector>

#include "mca_config.h"
#include "qp/check.h"
#include "select/selection.h"
#include "topo/snapshot.h"
#include "util/json.h"

namespace roce::doctor {

/// One --check result: the UD or RC outcome for one selected port.
struct CheckRow {
    std::string device;
    int port = 0;
    qp::CheckOutcome outcome;
};

/// Everything a report shows. Pointers are borrowed for the call.
struct Report {
    const topo::Snapshot *snapshot = nullptr;
    const select::SelectionReport *selection = nullptr;
    const select::Options *options = nullptr;
    const McaConfig *config = nullptr; ///< where each setting came from; may be null
    std::vector<CheckRow> checks;
    bool checked = false;          ///< --check was asked for
};

/// The human-readable report: the settings and, for each one not at its
/// default, where it came from ("btl_roce_gid_index = 3 (from
/// OMPI_MCA_btl_roce_gid_index)"), the parameter files looked at; per
/// device and port, the state, the
/// bond/VLAN/LAG picture behind its GIDs, the GID table with the chosen
/// entry marked "=>", and for each choice (one per peer) the selection and
/// why; then the --check results. Bytes outside printable ASCII (other than
/// the report's own line breaks) are escaped (util::printable).
std::string render_text(const Report &r);

/// The --json report: {"tool", "version", "source", "options", "notes",
/// "warnings", "configuration": {"settings": [{name, value, source,
/// shadows}], "files", "notes"}, "devices": [...tables...], "netdevs":
/// [...], "ports": [...], "checks": [...]}. Each "ports" element has device, port, peer,
/// gid_index, gid, gid_type ("RoCE v1"/"RoCE v2"/"IB"), netdev, pkey_index,
/// pkey, qkey, qkey_hex, path_mtu (bytes), path_mtu_enum, explanation,
/// decided_by (the rule that made the choice, null without one); when
/// nothing could be chosen the selection fields are null and "error" says
/// why.
util::Json render_json(const Report &r);

/// The bond/VLAN/LAG lines for one port (shared by both renderings).
std::vector<std::string> topology_lines(const topo::Snapshot &s, const topo::DeviceInfo &d,
                                        const topo::PortInfo &p);

} // namespace roce::doctor
