/* hb_h3_client_io.c - an hb_h3_client's datagrams, timers and requests
 * (see hb_h3_client_int.h): recvmmsg in, GSO batches out, ngtcp2's expiry,
 * streams opened for requests. */
#include "h3/hb_h3_client_int.h"

#ifndef HB_NO_H3

/* ---- I/O ---- */

/* The name of TLS alert a, or "?". */
static const char *alert_name(uint8_t a)
{
    const char *n = gnutls_alert_get_strname((gnutls_alert_description_t)a);
    return n ? n : "?";
}

/* The error ngtcp2 gave (rv), as one of ours. Unless the server closed or the
 * connection idled out, the CONNECTION_CLOSE hb_h3_client_close sends is
 * owed, with the matching code in p->last. */
static int quic_error(hb_h3_client *c, int rv, const char *where)
{
    struct hb__h3 *p = c->p;
    if (p->failed) { /* a callback failed: p->last holds its code (an HTTP/3 error's, or none) */
        c->over = 1;
        p->close_owed = 1;
        return p->fail_rc;
    }
    if (rv == NGTCP2_ERR_DRAINING || rv == NGTCP2_ERR_CLOSING) {
        ngtcp2_connection_close_error cc;
        ngtcp2_conn_get_connection_close_error(p->q, &cc);
        int app = cc.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION;
        char d[96];
        if (!app && !c->handshake_done &&
            (cc.error_code & ~(uint64_t)0xff) == NGTCP2_CRYPTO_ERROR) {
            /* the server's TLS refused the handshake (ALPN, groups, ciphers, ...) */
            uint8_t alert = (uint8_t)(cc.error_code & 0xff);
            if (alert == GNUTLS_A_HANDSHAKE_FAILURE && !p->wide_shares) {
                /* maybe the one key share (a server without X25519 that cannot send a
                 * HelloRetryRequest): the next connection offers P-256's too */
                p->wide_shares = 1;
                c->retry_shares = 1;
            }
            snprintf(d, sizeof d, "TLS alert %u (%s)", alert, alert_name(alert));
            return hb__h3_fail(c, HB_E_H3_HANDSHAKE, "the server refused the QUIC handshake: %s",
                               d);
        }
        snprintf(d, sizeof d, "%s error 0x%llx", app ? "application" : "transport",
                 (unsigned long long)cc.error_code);
        return hb__h3_fail(c, HB_E_H3_CLOSED, "the server closed the QUIC connection (%s)", d);
    }
    if (rv == NGTCP2_ERR_IDLE_CLOSE) /* silent, as the idle timeout is (RFC 9000 10.1) */
        return hb__h3_fail(c, HB_E_H3_TIMEOUT, "the QUIC connection idled out%s", "");
    if (rv == NGTCP2_ERR_RECV_VERSION_NEGOTIATION) /* the server kept no state: nothing to close */
        return hb__h3_fail(c, HB_E_H3,
                           "the server does not speak QUIC v1 (it answered with a Version "
                           "Negotiation)%s",
                           "");
    p->close_owed = 1;
    if (rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT) {
        /* a server that got our Initial but is slow frees its half-open state now */
        ngtcp2_connection_close_error_set_transport_error(&p->last, NGTCP2_NO_ERROR, NULL, 0);
        return hb__h3_fail(c, HB_E_H3_TIMEOUT, "no QUIC handshake within the handshake timeout%s",
                           "");
    }
    if (rv == NGTCP2_ERR_CRYPTO ||
        (!c->handshake_done && p->tls && rv == NGTCP2_ERR_CALLBACK_FAILURE)) {
        char d[HB_ERR_LEN - 64];
        uint8_t alert = ngtcp2_conn_get_tls_alert(p->q);
        /* no alert recorded: a generic handshake_failure still says "TLS" to the server */
        ngtcp2_connection_close_error_set_transport_error_tls_alert(
            &p->last, alert ? alert : (uint8_t)GNUTLS_A_HANDSHAKE_FAILURE, NULL, 0);
        unsigned status = gnutls_session_get_verify_cert_status(p->tls);
        gnutls_datum_t out = {NULL, 0};
        if (status) c->cert_rejected = 1;
        if (status &&
            gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) == 0) {
            snprintf(d, sizeof d, "certificate verification failed: %s", (char *)out.data);
            gnutls_free(out.data);
        } else if (status) {
            snprintf(d, sizeof d, "certificate verification failed (status 0x%x)", status);
        } else {
            snprintf(d, sizeof d, "TLS alert %u (%s)", alert, alert_name(alert));
        }
        return hb__h3_fail(c, HB_E_H3_HANDSHAKE, "QUIC handshake failed: %s", d);
    }
    ngtcp2_connection_close_error_set_transport_error_liberr(&p->last, rv, NULL, 0);
    char d[128];
    snprintf(d, sizeof d, "%s: %s", where, ngtcp2_strerror(rv));
    return hb__h3_fail(c, HB_E_H3, "%s", d);
}

/* Send the batch (one sendmsg, the kernel cutting it into gso-byte datagrams);
 * what is left moves to the front when the socket blocks. */
static int send_batch(hb_h3_client *c)
{
    struct hb__h3 *p = c->p;
    if (!p->ntx) return 0;
    size_t sent = 0;
    int rc = hb_udp_send(c->fd, NULL, 0, p->tx, p->txlen, p->gso, &p->gso_ok, &sent);
    c->st.dgrams_sent += (sent + p->gso - 1) / p->gso;
    c->st.bytes_sent += sent;
    if (rc == HB_AGAIN) {
        memmove(p->tx, p->tx + sent, p->txlen - sent);
        p->txlen -= sent;
        p->ntx = (uint32_t)((p->txlen + p->gso - 1) / p->gso);
        p->pending = c->blocked = 1;
        return HB_AGAIN;
    }
    if (rc < 0) return hb__h3_fail(c, rc, "send: %s", strerror(-rc));
    p->txlen = p->ntx = 0;
    p->pending = c->blocked = 0;
    return 0;
}

/* Pace from the handshake's end on: before an RTT sample ngtcp2 paces with its
 * 333 ms initial-RTT guess, which held the Finished back ~22 ms after the
 * first Initial (its write then sends ACKs only). The write that completes the
 * handshake is not paced either, or the first request waits a pacing timer. */
static void pace(struct hb__h3 *p, int hs_before, uint64_t now)
{
    if (hs_before) ngtcp2_conn_update_pkt_tx_time(p->q, now);
}

int hb_h3_client_write(hb_h3_client *c, uint64_t now)
{
    struct hb__h3 *p = c->p;
    if (c->over || !p->q) return c->over ? HB_E_H3 : 0;
    if (p->pending) return 0; /* blocked: hb_h3_client_writable goes on */
    p->now = now;
    int hs_before = ngtcp2_conn_get_handshake_completed(p->q);
    ngtcp2_vec vec[2];
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    for (;;) {
        int64_t sid = -1;
        int fin = 0;
        size_t nv = 0;
        h3_req *r = NULL;
        if (p->h && !hb__h3_next_tx(c, &sid, vec, &nv, &fin, &r)) sid = -1;
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
        ngtcp2_ssize ndata = -1;
        ngtcp2_pkt_info pi;
        /* a batch continues only with full-size datagrams; the first shorter one ends it */
        size_t room = p->ntx ? p->gso : PKT_MAX;
        ngtcp2_ssize n = ngtcp2_conn_writev_stream(p->q, &ps.path, &pi, p->tx + p->txlen, room,
                                                   &ndata, flags, sid, vec, nv, now);
        if (n < 0) {
            if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED || n == NGTCP2_ERR_STREAM_SHUT_WR) {
                hb__h3_tx_block(c, r); /* flow control opens it again, or it is over */
                continue;
            }
            if (n == NGTCP2_ERR_WRITE_MORE) {
                hb__h3_sent(c, r, (size_t)ndata);
                continue;
            }
            return quic_error(c, (int)n, "write");
        }
        if (ndata >= 0 && sid >= 0) hb__h3_sent(c, r, (size_t)ndata);
        if (n == 0) { /* nothing more, or congestion-limited */
            int rc = send_batch(c);
            pace(p, hs_before, now);
            return rc == HB_AGAIN ? 0 : rc;
        }
        if (!p->ntx) p->gso = (size_t)n;
        p->txlen += (size_t)n;
        p->ntx++;
        if ((size_t)n < p->gso || (size_t)n < ngtcp2_conn_get_path_max_tx_udp_payload_size(p->q) ||
            p->ntx == TX_BATCH) {
            int rc = send_batch(c);
            if (rc == HB_AGAIN) {
                pace(p, hs_before, now);
                return 0;
            }
            if (rc < 0) return rc;
        }
    }
}

int hb_h3_client_writable(hb_h3_client *c, uint64_t now)
{
    struct hb__h3 *p = c->p;
    if (c->over || !p->q) return 0;
    if (p->pending) {
        int rc = send_batch(c);
        if (rc == HB_AGAIN) return 0;
        if (rc < 0) return rc;
    }
    return hb_h3_client_write(c, now);
}

int hb_h3_client_read(hb_h3_client *c, uint64_t now)
{
    struct hb__h3 *p = c->p;
    if (c->over || !p->q) return c->over ? HB_E_H3 : 0;
    p->now = now;
    ngtcp2_path path = {
        {(struct sockaddr *)&p->local, p->llen}, {(struct sockaddr *)&p->remote, p->rlen}, NULL};
    ngtcp2_pkt_info pi = {0};
    for (;;) {
        /* a batch per syscall; a short batch means the queue was empty (a
         * datagram arriving later is a new edge for the caller's epoll) */
        int n = hb_udp_recv(c->fd, &p->rx);
        if (n == 0) break;
        if (n < 0) {
            /* ICMP port unreachable on a connected socket: nobody listens there */
            int e = -n;
            char d[96];
            snprintf(d, sizeof d, "%s%s", strerror(e),
                     e == ECONNREFUSED ? " (no QUIC listener on that UDP port)" : "");
            return hb__h3_fail(c, -e, "recv: %s", d);
        }
        if (n > 0) c->last_rx = now;
        for (int i = 0; i < n; i++) {
            size_t len;
            const uint8_t *d = hb_udp_rx_data(&p->rx, i, &len);
            c->st.dgrams_recv++;
            c->st.bytes_recv += len;
            if (!d) continue; /* over our limit: lost */
            int rv = ngtcp2_conn_read_pkt(p->q, &path, &pi, d, len, now);
            if (rv != 0) return quic_error(c, rv, "read");
            if (p->goaway_owed) hb__h3_goaway_cancel(c);
        }
        if (n < HB_UDP_RX_BATCH) break;
    }
    return 0;
}

int hb_h3_client_expiry(hb_h3_client *c, uint64_t now)
{
    struct hb__h3 *p = c->p;
    if (c->over || !p->q) return c->over ? HB_E_H3 : 0;
    p->now = now;
    int rv = ngtcp2_conn_handle_expiry(p->q, now);
    if (rv != 0) return quic_error(c, rv, "timer");
    ngtcp2_conn_stat cs;
    ngtcp2_conn_get_conn_stat(p->q, &cs);
    if (cs.pto_count > p->last_pto) c->st.pto += cs.pto_count - p->last_pto;
    p->last_pto = cs.pto_count;
    return hb_h3_client_write(c, now);
}

uint64_t hb_h3_client_next_expiry(const hb_h3_client *c)
{
    if (!c->p || !c->p->q || c->over) return UINT64_MAX;
    return ngtcp2_conn_get_expiry(c->p->q);
}

void hb_h3_client_describe(const hb_h3_client *c, char *buf, size_t len)
{
    const char *suite = c->p && c->p->tls ? gnutls_ciphersuite_get(c->p->tls) : NULL;
    snprintf(buf, len, "QUIC v1,TLSv1.3,%s,h3", suite ? suite : "?");
}

uint32_t hb_h3_client_room(const hb_h3_client *c)
{
    if (!c->p || !c->p->h || c->over || !c->handshake_done || c->goaway || !c->p->free_req)
        return 0;
    uint64_t left = ngtcp2_conn_get_streams_bidi_left(c->p->q);
    uint32_t m = c->p->set.max_streams > c->nopen ? c->p->set.max_streams - c->nopen : 0;
    return left < m ? (uint32_t)left : m;
}

uint64_t hb_h3_client_peer_streams(const hb_h3_client *c)
{
    if (!c->p || !c->p->q || c->over) return 0;
    return ngtcp2_conn_get_streams_bidi_left(c->p->q);
}

static int64_t submit(hb_h3_client *c, const hb_header *fields, size_t nfields, int with_body,
                      const void *body, size_t body_len, void *sud)
{
    struct hb__h3 *p = c->p;
    if (hb_h3_client_room(c) == 0) return HB_AGAIN;
    if (nfields > NV_MAX) return hb__h3_fail(c, HB_E_INVALID, "more than %s request fields", "128");
    int own = -1; /* the free body entry this request takes */
    if (body) {
        for (int i = 0; i < HB_H3_BODIES && own < 0; i++)
            if (p->bodies[i].sid < 0) own = i;
        if (own < 0) return HB_AGAIN;
    }
    h3_req *r = p->free_req;
    int64_t sid;
    int rv = ngtcp2_conn_open_bidi_stream(p->q, &sid, r);
    if (rv == NGTCP2_ERR_STREAM_ID_BLOCKED) return HB_AGAIN;
    if (rv != 0) return quic_error(c, rv, "open stream");
    p->free_req = r->next;
    p->next_sid = sid + 4;
    if (own >= 0) {
        p->bodies[own].sid = sid;
        p->bodies[own].data = body;
        p->bodies[own].len = body_len;
        p->nbodies++;
    }
    if (own < 0 && with_body) {
        body = p->set.body;
        body_len = p->set.body_len;
    }
    rv = hb__h3_request(c, r, sid, fields, nfields, own >= 0 || with_body ? body : NULL,
                        own >= 0 || with_body ? body_len : 0, sud);
    if (rv < 0) {
        if (own >= 0) hb__h3_body_release(p, sid);
        r->sud = NULL;
        (void)ngtcp2_conn_shutdown_stream(p->q, sid, HB_H3_REQUEST_CANCELLED);
        return rv;
    }
    c->nopen++;
    return sid;
}

int64_t hb_h3_client_submit(hb_h3_client *c, const hb_header *fields, size_t nfields, int with_body,
                            void *sud)
{
    return submit(c, fields, nfields, with_body, NULL, 0, sud);
}

int64_t hb_h3_client_submit_body(hb_h3_client *c, const hb_header *fields, size_t nfields,
                                 const void *body, size_t body_len, void *sud)
{
    return submit(c, fields, nfields, 0, body_len ? body : NULL, body_len, sud);
}

#endif /* HB_NO_H3 */
