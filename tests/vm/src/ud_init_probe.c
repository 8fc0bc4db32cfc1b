/* ud_init_probe: try one UD QP RESET->INIT transition and print what the kernel says.
 *
 *   ud_init_probe DEVICE PORT PKEY_INDEX QKEY
 *
 * Prints one line "ud_init_probe: <attributes>: result=OK" or
 * "...: result=EPERM errno=1 (Operation not permitted)" and exits 0 whenever
 * the transition was attempted, so that the caller asserts the result string.
 * Exits 2 when the probe could not get as far as ibv_modify_qp (no device, no
 * PD/CQ/QP): that is a broken fabric, never an expected outcome.
 *
 * Real verbs only (rdma-core's libibverbs): this is the kernel's answer, which
 * the tests/vm suite pins as a regression (see tests/vm/one-user.test).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static int parse_u32(const char *s, uint32_t *out) {
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || v > UINT32_MAX) {
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static struct ibv_context *open_device(const char *name) {
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    struct ibv_context *ctx = NULL;
    int found = 0;
    if (list == NULL) {
        fprintf(stderr, "ud_init_probe: ibv_get_device_list: %s\n", strerror(errno));
        return NULL;
    }
    for (int i = 0; i < n; ++i) {
        if (strcmp(ibv_get_device_name(list[i]), name) == 0) {
            found = 1;
            ctx = ibv_open_device(list[i]);
            if (ctx == NULL) {
                fprintf(stderr, "ud_init_probe: ibv_open_device(%s): %s\n", name, strerror(errno));
            }
            break;
        }
    }
    if (!found) {
        fprintf(stderr, "ud_init_probe: no RDMA device named %s\n", name);
    }
    ibv_free_device_list(list);
    return ctx;
}

int main(int argc, char **argv) {
    uint32_t port = 0, pkey_index = 0, qkey = 0;
    if (argc != 5 || parse_u32(argv[2], &port) != 0 || parse_u32(argv[3], &pkey_index) != 0 ||
        parse_u32(argv[4], &qkey) != 0 || port > 255 || pkey_index > 65535) {
        fprintf(stderr, "usage: ud_init_probe DEVICE PORT PKEY_INDEX QKEY\n");
        return 2;
    }
    int status = 2;
    struct ibv_context *ctx = open_device(argv[1]);
    struct ibv_pd *pd = NULL;
    struct ibv_cq *cq = NULL;
    struct ibv_qp *qp = NULL;
    if (ctx == NULL) {
        goto out;
    }
    pd = ibv_alloc_pd(ctx);
    if (pd == NULL) {
        fprintf(stderr, "ud_init_probe: ibv_alloc_pd: %s\n", strerror(errno));
        goto out;
    }
    cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
    if (cq == NULL) {
        fprintf(stderr, "ud_init_probe: ibv_create_cq: %s\n", strerror(errno));
        goto out;
    }
    struct ibv_qp_init_attr init = {
        .send_cq = cq,
        .recv_cq = cq,
        .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_UD,
    };
    qp = ibv_create_qp(pd, &init);
    if (qp == NULL) {
        fprintf(stderr, "ud_init_probe: ibv_create_qp(UD): %s\n", strerror(errno));
        goto out;
    }
    struct ibv_qp_attr attr = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = (uint16_t)pkey_index,
        .port_num = (uint8_t)port,
        .qkey = qkey,
    };
    int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    printf("ud_init_probe: ibv_modify_qp(UD, RESET->INIT) on %s port %" PRIu32
           " pkey_index %" PRIu32 " qkey 0x%08" PRIx32 " as uid %u: ",
           argv[1], port, pkey_index, qkey, (unsigned)getuid());
    if (rc == 0) {
        printf("result=OK\n");
    } else {
        const char *name = strerrorname_np(rc);
        printf("result=%s errno=%d (%s)\n", name ? name : "E?", rc, strerror(rc));
    }
    status = 0;
out:
    if (qp != NULL && ibv_destroy_qp(qp) != 0) {
        fprintf(stderr, "ud_init_probe: ibv_destroy_qp failed\n");
    }
    if (cq != NULL && ibv_destroy_cq(cq) != 0) {
        fprintf(stderr, "ud_init_probe: ibv_destroy_cq failed\n");
    }
    if (pd != NULL && ibv_dealloc_pd(pd) != 0) {
        fprintf(stderr, "ud_init_probe: ibv_dealloc_pd failed\n");
    }
    if (ctx != NULL && ibv_close_device(ctx) != 0) {
        fprintf(stderr, "ud_init_probe: ibv_close_device failed\n");
    }
    return status;
}
