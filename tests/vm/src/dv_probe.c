/* dv_probe: does DEVICE speak mlx5dv, and what LAG does it report?
 *
 *   dv_probe DEVICE
 *
 * Prints "dv_probe: DEVICE mlx5dv=no" or "dv_probe: DEVICE mlx5dv=yes lag_ports=N".
 * Exits 0 when the question was answered, 2 when the device could not be
 * opened. The VM tests use it to decide, on the device in front of them, that
 * mlx5-only features (LAG port affinity, DC) must SKIP on soft-RoCE instead
 * of being assumed either way.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: dv_probe DEVICE\n");
        return 2;
    }
    int n = 0, status = 2;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list == NULL) {
        fprintf(stderr, "dv_probe: ibv_get_device_list: %s\n", strerror(errno));
        return 2;
    }
    for (int i = 0; i < n; ++i) {
        if (strcmp(ibv_get_device_name(list[i]), argv[1]) != 0) {
            continue;
        }
        if (!mlx5dv_is_supported(list[i])) {
            printf("dv_probe: %s mlx5dv=no\n", argv[1]);
            status = 0;
            break;
        }
        struct ibv_context *ctx = ibv_open_device(list[i]);
        if (ctx == NULL) {
            fprintf(stderr, "dv_probe: ibv_open_device(%s): %s\n", argv[1], strerror(errno));
            break;
        }
        struct mlx5dv_context dv = {.comp_mask = MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS};
        int rc = mlx5dv_query_device(ctx, &dv);
        if (rc != 0) {
            fprintf(stderr, "dv_probe: mlx5dv_query_device: %s\n", strerror(rc));
        } else {
            unsigned lag = (dv.comp_mask & MLX5DV_CONTEXT_MASK_NUM_LAG_PORTS) ? dv.num_lag_ports : 0;
            printf("dv_probe: %s mlx5dv=yes lag_ports=%u\n", argv[1], lag);
            status = 0;
        }
        ibv_close_device(ctx);
        break;
    }
    if (status == 2) {
        fprintf(stderr, "dv_probe: could not query %s\n", argv[1]);
    }
    ibv_free_device_list(list);
    return status;
}
