#!/bin/sh
# Checks an installed pair of components end to end against the system's
# Open MPI: they load, list their parameters, export only the component
# symbol, decline quietly without RoCE hardware (with a reason at verbose
# level), and report invalid parameter values clearly without crashing.
#
# usage: check-components.sh COMPONENT_DIR [MPICC]
# Exit status 0 when every check passes; prints one line per check.
set -u
dir=${1:?usage: check-components.sh COMPONENT_DIR [MPICC]}
mpicc=${2:-mpicc}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

# The project-qualified name of Open MPI's (OPAL's) component path, which
# 4.1 and 5.0 both accept: 5.0's mpirun also hands the plain
# mca_base_component_path to PMIx, whose component search then scans $dir
# and warns on stderr about our file names ("bad prefix - expected:
# pmix_mca_") and about SYS_DEFAULT. contrib/test.sh sets it the same way.
export OMPI_MCA_opal_mca_base_component_path="$dir:SYS_DEFAULT"
as_root=
[ "$(id -u)" = 0 ] && as_root=--allow-run-as-root
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; [ -f "${2:-/dev/null}" ] && sed 's/^/    | /' "$2" | head -40; }

for f in mca_btl_roce.so mca_pml_roce.so; do
    [ -f "$dir/$f" ] && ok "$f installed in $dir" || bad "$f missing from $dir"
done

ompi_info >"$work/info" 2>&1
grep -q 'MCA btl: roce' "$work/info" && ok "ompi_info lists MCA btl: roce" || bad "ompi_info lacks btl roce" "$work/info"
grep -q 'MCA pml: roce' "$work/info" && ok "ompi_info lists MCA pml: roce" || bad "ompi_info lacks pml roce" "$work/info"
# Open MPI's shared-memory btl: vader in 4.1, sm in 5.0.
if grep -q 'MCA btl: sm ' "$work/info"; then shm=sm; else shm=vader; fi

ompi_info --param btl roce --level 9 >"$work/btlp" 2>&1
for p in if_include if_exclude gid_index roce_version address_family qkey verbose transport \
    dc_peer_threshold dc_dcis; do
    grep -q "\"btl_roce_$p\"" "$work/btlp" || { bad "btl_roce_$p not shown by ompi_info" "$work/btlp"; continue; }
    ok "ompi_info --param btl roce shows btl_roce_$p"
done
grep -Eq 'Valid values: (0:"auto", 1:"v1", 2:"v2"|0\|auto, 1\|v1, 2\|v2)' "$work/btlp" && ok "roce_version lists its names" || bad "roce_version enum missing" "$work/btlp"
# The btl's capabilities as Open MPI registered them: RDMA put/get, flush and
# the atomics (ob1's rendezvous and osc/rdma need them), and the parameters
# Open MPI registers only for a btl with RDMA (latency, bandwidth, pipeline).
ompi_info --param btl roce --level 9 --parsable >"$work/btlparse" 2>&1
flags=$(sed -n 's/^mca:btl:roce:param:btl_roce_flags:value://p' "$work/btlparse")
missing=
for f in send put get inplace atomics fetching-atomics; do
    case ",$flags," in *",$f,"*) ;; *) missing="$missing $f" ;; esac
done
[ -n "$flags" ] && [ -z "$missing" ] && ok "btl_roce_flags = $flags" ||
    bad "btl_roce_flags = '$flags' lacks:$missing" "$work/btlparse"
for p in latency bandwidth rdma_pipeline_send_length put_limit get_limit; do
    grep -q "^mca:btl:roce:param:btl_roce_$p:value:" "$work/btlparse" &&
        ok "ompi_info registers btl_roce_$p" || bad "btl_roce_$p not registered" "$work/btlparse"
done
ompi_info --param pml roce --level 9 >"$work/pmlp" 2>&1
for p in eager_limit verbose priority stream_limit; do
    grep -q "\"pml_roce_$p\"" "$work/pmlp" && ok "ompi_info --param pml roce shows pml_roce_$p" || bad "pml_roce_$p not shown" "$work/pmlp"
done
# MPI_T performance variables (listed at level 9 like ob1's queue lengths).
for v in btl:bytes_sent btl:failovers btl:cm_dropped_unauthenticated btl:path_bytes_sent \
         pml:posted_recvq_length pml:unexpected_msgq_length pml:match_attempts pml:rndv_sends_in_flight; do
    c=${v%%:*} n=${v#*:}
    grep -q "performance \"${c}_roce_$n\"" "$work/${c}p" && ok "ompi_info lists the performance variable ${c}_roce_$n" \
        || bad "performance variable ${c}_roce_$n not listed" "$work/${c}p"
done

for c in btl pml; do
    syms=$(nm -D --defined-only "$dir/mca_${c}_roce.so" | awk '{print $3}' | tr '\n' ' ')
    [ "$syms" = "mca_${c}_roce_component " ] && ok "mca_${c}_roce.so exports only mca_${c}_roce_component" \
        || { echo "$syms" >"$work/syms"; bad "mca_${c}_roce.so exports more than its component" "$work/syms"; }
done

if ! "$mpicc" -o "$work/hello" "$here/../../contrib/hello.c" 2>"$work/cc"; then
    bad "cannot build hello.c with $mpicc" "$work/cc"
else
    run() { mpirun $as_root -np 2 --mca pml ob1 --mca btl self,$shm,roce "$@" "$work/hello"; }
    if run >"$work/out" 2>"$work/err" && [ "$(grep -c 'ring exchange ok' "$work/out")" = 2 ]; then
        ok "mpirun -np 2 --mca pml ob1 --mca btl self,$shm,roce ./hello runs"
    else
        cat "$work/out" >>"$work/err"; bad "hello with btl self,$shm,roce failed" "$work/err"
    fi
    [ ! -s "$work/err" ] && ok "that run printed nothing on stderr" || bad "stderr not empty" "$work/err"

    run --mca btl_base_verbose 100 >"$work/vout" 2>&1
    n=$(grep -c 'btl roce: not used: ' "$work/vout")
    if [ "$n" = 2 ]; then
        ok "btl_base_verbose 100 gives each rank's one-line reason: $(grep -m1 'btl roce: not used' "$work/vout" | sed 's/^.*btl roce: //')"
    elif ls /sys/class/infiniband/ >/dev/null 2>&1 && [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
        grep -q 'btl roce:' "$work/vout" && ok "RDMA devices present: btl roce logged its decision" || bad "no btl roce line at verbose 100" "$work/vout"
    else
        bad "expected 2 'btl roce: not used' lines at btl_base_verbose 100, got $n" "$work/vout"
    fi

    # Open MPI 4.1.4's relay of help messages from the ranks on mpirun's own
    # node loses some (a self-send that frees the message before copying it,
    # docs/troubleshooting.md section 3): mpirun prints "ORTE_ERROR_LOG: Data
    # unpack would read past end of buffer in file .../show_help.c" instead
    # (btl tcp's own --mca btl_tcp_if_include nosuch0 warning went missing
    # the same way in 1 of 6 runs here; ours in 2 of 12 on a quiet host, 3 in
    # a row right after a VM run). Only then is the job run again, at most 5
    # times; the message must still come out.
    # usage: run_until_said MESSAGE OUT ERR MPIRUN-ARGS...; leaves the last
    # run's exit status in rc.
    run_until_said() {
        said=$1 out=$2 err=$3
        shift 3
        for try in 1 2 3 4 5; do
            run "$@" >"$out" 2>"$err"
            rc=$?
            grep -q "$said" "$err" && break
            grep -q 'ORTE_ERROR_LOG: .*show_help\.c' "$err" || break
            echo "note: try $try: Open MPI lost the help message (show_help.c relay error); running again"
        done
    }
    run_until_said 'btl_roce_gid_index = -7 is invalid' "$work/gout" "$work/gerr" --mca btl_roce_gid_index -7
    if [ $rc = 0 ] && grep -q 'btl_roce_gid_index = -7 is invalid: allowed values are -1 (automatic) or a GID table index 0..65535' "$work/gerr"; then
        ok "btl_roce_gid_index -7: clear error, job unharmed (exit 0)"
    else
        echo "exit status $rc" >>"$work/gerr"; bad "btl_roce_gid_index -7 not reported clearly" "$work/gerr"
    fi
    if grep -qiE 'signal|segmentation|core dumped' "$work/gerr"; then bad "crash with gid_index -7" "$work/gerr"; fi

    # A tuning value out of range: the same clear error, the job unharmed.
    run_until_said 'btl_roce_rdma_chunk = 1000 is invalid' "$work/cout" "$work/cerr" --mca btl_roce_rdma_chunk 1000
    if [ $rc = 0 ] && grep -q 'btl_roce_rdma_chunk = 1000 is invalid: allowed values are multiples of 4096 from 4096 to 1073741824 (bytes)' "$work/cerr"; then
        ok "btl_roce_rdma_chunk 1000: clear error naming parameter, value and range, job unharmed"
    else
        echo "exit status $rc" >>"$work/cerr"; bad "btl_roce_rdma_chunk 1000 not reported clearly" "$work/cerr"
    fi

    mpirun $as_root -np 1 --mca pml roce --mca pml_roce_eager_limit 10 "$work/hello" >"$work/pout" 2>&1
    rc=$?
    if [ $rc != 0 ] && grep -q 'pml_roce_eager_limit = 10 is invalid: allowed values are 64..4194304 (bytes)' "$work/pout"; then
        ok "pml_roce_eager_limit 10: clear error naming parameter, value and range"
    else
        bad "pml_roce_eager_limit 10 not reported clearly (exit $rc)" "$work/pout"
    fi

    # The pml's performance variables read through MPI_T while traffic flows.
    if ! "$mpicc" -o "$work/pvars" "$here/pvars.c" 2>"$work/cc"; then
        bad "cannot build tests/mpi/pvars.c with $mpicc" "$work/cc"
    elif mpirun $as_root -np 2 --mca pml roce --mca btl self,$shm "$work/pvars" >"$work/vout" 2>&1 &&
        grep -q '^pvars: ok' "$work/vout"; then
        ok "MPI_T: pml roce's queue lengths, match attempts and send counters move with the traffic ($(grep -c ': PASS: ' "$work/vout") checks)"
    else
        bad "MPI_T performance variables of pml roce" "$work/vout"
    fi
fi

echo "component checks: $pass passed, $fail failed"
[ "$fail" = 0 ]
