/*
 * A load generator and a no-work server for RocketMQ remoting frames, for
 * benchmarks/load_serve.py (compiled there with gcc at run time; see its docstring).
 *
 *   load client HOST PORT CONNECTIONS SECONDS WARMUP SETUP_FILE LOAD_FILE
 *       CONNECTIONS closed loops on one epoll: connection i first sends setup frame
 *       i % n (once, untimed; the file may be empty), then load frame i % n again and again,
 *       each time waiting for one whole answer frame. After WARMUP seconds, latencies are
 *       counted for SECONDS seconds. Prints one JSON object: requests, seconds, and the
 *       latency histogram (1 us buckets, nonzero ones only).
 *   load null PORT ANSWER_FILE
 *       A server on 127.0.0.1:PORT that answers every whole frame it reads with the frame in
 *       ANSWER_FILE, unchanged and without looking at the request: what a name server that
 *       does no work would reach (the client's ceiling). Prints "listening PORT", then runs
 *       until killed.
 *
 * Frame files hold whole frames back to back (int32 big-endian length prefix included).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_US 1000000 /* latencies above 1 s land in the last bucket */
#define BUF (1 << 20)

typedef struct { unsigned char *data; size_t len; } frame_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) { perror(what); exit(2); }

static frame_t *read_frames(const char *path, int *count) {
    FILE *f = fopen(path, "rb");
    if (!f) die(path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *all = malloc(size ? size : 1);
    if (size && fread(all, 1, size, f) != (size_t)size) die("read");
    fclose(f);
    frame_t *frames = NULL;
    int n = 0;
    for (long pos = 0; pos + 4 <= size;) {
        uint32_t len = ntohl(*(uint32_t *)(all + pos));
        frames = realloc(frames, sizeof(frame_t) * (n + 1));
        frames[n].data = all + pos;
        frames[n].len = len + 4;
        pos += len + 4;
        n++;
    }
    *count = n;
    return frames;
}

static void write_all(int fd, const unsigned char *p, size_t len) {
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) { /* tiny frames: wait for room */
                struct timespec ts = {0, 10000};
                nanosleep(&ts, NULL);
                continue;
            }
            die("write");
        }
        p += w;
        len -= w;
    }
}

typedef struct {
    int fd;
    int setup_done;
    double sent_at;
    size_t have;      /* bytes of the current answer read so far */
    size_t need;      /* its total length (0: prefix not complete yet) */
    unsigned char prefix[4];
} conn_t;

static int connect_to(const char *host, int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, host, &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Feed n bytes of answer to c; return 1 when a whole frame has arrived. */
static int consume(conn_t *c, const unsigned char *p, size_t n, size_t *used) {
    size_t i = 0;
    while (i < n) {
        if (c->have < 4) {
            c->prefix[c->have++] = p[i++];
            if (c->have == 4) c->need = 4 + ntohl(*(uint32_t *)c->prefix);
            continue;
        }
        size_t take = c->need - c->have;
        if (take > n - i) take = n - i;
        c->have += take;
        i += take;
        if (c->have == c->need) break;
    }
    *used = i;
    if (c->have >= 4 && c->have == c->need) {
        c->have = c->need = 0;
        return 1;
    }
    return 0;
}

static int client(int argc, char **argv) {
    if (argc != 9) { fprintf(stderr, "usage: load client HOST PORT N SECONDS WARMUP SETUP LOAD\n"); return 2; }
    const char *host = argv[2];
    int port = atoi(argv[3]), n = atoi(argv[4]);
    double seconds = atof(argv[5]), warmup = atof(argv[6]);
    int nsetup = 0, nload = 0;
    frame_t *setup = read_frames(argv[7], &nsetup), *load = read_frames(argv[8], &nload);
    if (!nload) { fprintf(stderr, "no load frames\n"); return 2; }
    uint32_t *hist = calloc(MAX_US + 1, sizeof(uint32_t));
    conn_t *conns = calloc(n, sizeof(conn_t));
    int ep = epoll_create1(0);
    for (int i = 0; i < n; i++) {
        conns[i].fd = connect_to(host, port);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
        epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev);
    }
    double start = now_s();
    double measure_from = start + warmup, stop_at = measure_from + seconds;
    long requests = 0;
    for (int i = 0; i < n; i++) {
        conn_t *c = &conns[i];
        c->setup_done = nsetup == 0;
        frame_t *f = c->setup_done ? &load[i % nload] : &setup[i % nsetup];
        c->sent_at = now_s();
        write_all(c->fd, f->data, f->len);
    }
    unsigned char *buf = malloc(BUF);
    struct epoll_event events[256];
    int open = n;
    while (open > 0) {
        int k = epoll_wait(ep, events, 256, 1000);
        if (k < 0 && errno == EINTR) continue;
        for (int e = 0; e < k; e++) {
            conn_t *c = &conns[events[e].data.u32];
            ssize_t r = read(c->fd, buf, BUF);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN) continue;
                fprintf(stderr, "server closed a connection\n");
                return 3;
            }
            size_t off = 0;
            while (off < (size_t)r) {
                size_t used;
                int done = consume(c, buf + off, r - off, &used);
                off += used;
                if (!done) continue;
                double t = now_s();
                if (c->setup_done && c->sent_at >= measure_from && t <= stop_at) {
                    long us = (long)((t - c->sent_at) * 1e6);
                    hist[us > MAX_US ? MAX_US : us]++;
                    requests++;
                }
                c->setup_done = 1;
                if (t >= stop_at) {
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                    close(c->fd);
                    c->fd = -1;
                    open--;
                    break;
                }
                frame_t *f = &load[events[e].data.u32 % nload];
                c->sent_at = t;
                write_all(c->fd, f->data, f->len);
            }
        }
    }
    printf("{\"requests\": %ld, \"seconds\": %.6f, \"hist\": [", requests, seconds);
    int first = 1;
    for (long us = 0; us <= MAX_US; us++) {
        if (!hist[us]) continue;
        printf("%s[%ld, %u]", first ? "" : ", ", us, hist[us]);
        first = 0;
    }
    printf("]}\n");
    return 0;
}

static int null_server(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: load null PORT ANSWER_FILE\n"); return 2; }
    int nanswer = 0;
    frame_t *answer = read_frames(argv[3], &nanswer);
    if (nanswer != 1) { fprintf(stderr, "one answer frame expected\n"); return 2; }
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
    if (listen(lfd, 1024) < 0) die("listen");
    socklen_t alen = sizeof a;
    getsockname(lfd, (struct sockaddr *)&a, &alen);
    printf("listening %d\n", ntohs(a.sin_port));
    fflush(stdout);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    /* per fd: bytes into the current request frame */
    static conn_t state[65536];
    unsigned char *buf = malloc(BUF);
    struct epoll_event events[256];
    for (;;) {
        int k = epoll_wait(ep, events, 256, -1);
        if (k < 0 && errno == EINTR) continue;
        for (int e = 0; e < k; e++) {
            int fd = events[e].data.fd;
            if (fd == lfd) {
                int c = accept4(lfd, NULL, NULL, 0);
                if (c < 0 || c >= 65536) { if (c >= 0) close(c); continue; }
                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                memset(&state[c], 0, sizeof(conn_t));
                struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
                epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                continue;
            }
            ssize_t r = read(fd, buf, BUF);
            if (r <= 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                close(fd);
                continue;
            }
            size_t off = 0;
            while (off < (size_t)r) {
                size_t used;
                int done = consume(&state[fd], buf + off, r - off, &used);
                off += used;
                if (done) write_all(fd, answer[0].data, answer[0].len);
            }
        }
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "client")) return client(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "null")) return null_server(argc, argv);
    fprintf(stderr, "usage: load client ... | load null ...\n");
    return 2;
}
