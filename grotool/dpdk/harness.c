/* grotool's DPDK oracle: frames in, what librte_gro returned out.
 *
 * stdin: a header (u32 mode 0=light 1=heavy, u32 burst, u32 flush_every,
 * u32 max_flows, u32 max_items, u32 longest frame, u32 mbufs, u64 gro_types), then per frame: u32 length,
 * u32 packet_type, u16 l2_len, u16 l3_len, u16 l4_len, u16 outer_l2_len,
 * u16 outer_l3_len, u16 pad, bytes.
 * The packet type and header lengths are the application's classification
 * (grotool.dpdk.classify), as a NIC or testpmd's parser would set them.
 * stdout: per returned packet: u32 frames covered, u32 frame index each
 * (mbuf chain order), u32 length, bytes; then a u32 0xffffffff terminator.
 * Light mode: rte_gro_reassemble_burst on each burst.  Heavy mode: a GRO
 * context, rte_gro_reassemble on each burst (its unprocessed packets go out
 * at once), rte_gro_timeout_flush(timeout 0) after every flush_every bursts
 * and at the end of the input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_gro.h>
#include <rte_errno.h>

#define FRAME_INDEX(m) ((m)->hash.usr)

static struct rte_mempool *pool;

static int read_exact(void *buf, size_t n)
{
	return fread(buf, 1, n, stdin) == n ? 0 : -1;
}

static void write_exact(const void *buf, size_t n)
{
	if (fwrite(buf, 1, n, stdout) != n) {
		fprintf(stderr, "grotool-dpdk: write failed\n");
		exit(1);
	}
}

static void emit(struct rte_mbuf *m)
{
	uint32_t n = m->nb_segs, len = m->pkt_len;
	struct rte_mbuf *s;

	write_exact(&n, 4);
	for (s = m; s != NULL; s = s->next) {
		uint32_t idx = FRAME_INDEX(s);
		write_exact(&idx, 4);
	}
	write_exact(&len, 4);
	for (s = m; s != NULL; s = s->next)
		write_exact(rte_pktmbuf_mtod(s, void *), s->data_len);
	rte_pktmbuf_free(m);
}

int main(int argc, char **argv)
{
	uint32_t hdr[7];
	uint64_t types;
	struct rte_gro_param param;
	void *ctx = NULL;
	struct rte_mbuf **burst, **out;
	uint32_t index = 0, nb_bursts = 0, end = 0xffffffffu;
	int eof = 0;

	if (rte_eal_init(argc, argv) < 0) {
		fprintf(stderr, "grotool-dpdk: rte_eal_init failed\n");
		return 4;
	}
	if (read_exact(hdr, sizeof(hdr)) || read_exact(&types, 8))
		return 3;
	if (hdr[1] == 0 || hdr[1] > 65535 || hdr[2] == 0)
		return 3;
	if (hdr[5] > 65535 - RTE_PKTMBUF_HEADROOM)
		return 3;
	pool = rte_pktmbuf_pool_create("grotool", hdr[6], 0, 0,
				       hdr[5] + RTE_PKTMBUF_HEADROOM, 0);
	if (pool == NULL) {
		fprintf(stderr, "grotool-dpdk: mbuf pool: %s\n", rte_strerror(rte_errno));
		return 4;
	}
	memset(&param, 0, sizeof(param));
	param.gro_types = types;
	param.max_flow_num = hdr[3];
	param.max_item_per_flow = hdr[4];
	param.socket_id = 0;
	if (hdr[0] == 1) {
		ctx = rte_gro_ctx_create(&param);
		if (ctx == NULL) {
			fprintf(stderr, "grotool-dpdk: rte_gro_ctx_create failed\n");
			return 4;
		}
	}
	burst = calloc(hdr[1], sizeof(*burst));
	out = calloc(1024, sizeof(*out));
	while (!eof) {
		uint16_t n = 0, i, left;

		while (n < hdr[1]) {
			uint32_t meta[2];
			uint16_t lens[6];
			struct rte_mbuf *m;

			if (read_exact(meta, 8)) {
				eof = 1;
				break;
			}
			if (read_exact(lens, 12) || meta[0] > hdr[5])
				return 3;
			m = rte_pktmbuf_alloc(pool);
			if (m == NULL) {
				fprintf(stderr, "grotool-dpdk: mbuf pool exhausted\n");
				return 4;
			}
			if (read_exact(rte_pktmbuf_append(m, meta[0]), meta[0]))
				return 3;
			m->packet_type = meta[1];
			m->l2_len = lens[0];
			m->l3_len = lens[1];
			m->l4_len = lens[2];
			m->outer_l2_len = lens[3];
			m->outer_l3_len = lens[4];
			FRAME_INDEX(m) = index++;
			burst[n++] = m;
		}
		if (n == 0)
			break;
		nb_bursts++;
		if (ctx == NULL) {
			left = rte_gro_reassemble_burst(burst, n, &param);
			for (i = 0; i < left; i++)
				emit(burst[i]);
			continue;
		}
		left = rte_gro_reassemble(burst, n, ctx);
		for (i = 0; i < left; i++)
			emit(burst[i]);
		if (nb_bursts % hdr[2] == 0 || eof) {
			uint16_t k;

			while ((k = rte_gro_timeout_flush(ctx, 0, types, out, 1024)) > 0)
				for (i = 0; i < k; i++)
					emit(out[i]);
		}
	}
	if (ctx != NULL) {
		uint16_t k, i;

		while ((k = rte_gro_timeout_flush(ctx, 0, types, out, 1024)) > 0)
			for (i = 0; i < k; i++)
				emit(out[i]);
		rte_gro_ctx_destroy(ctx);
	}
	write_exact(&end, 4);
	fflush(stdout);
	rte_eal_cleanup();
	return 0;
}
