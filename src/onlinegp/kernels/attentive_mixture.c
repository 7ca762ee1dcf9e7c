/* The Attentive Kernel in one pass over the entries (Chen et al. 2024, eq. 5; Chen et al. 2022):
 *     k_ij = u_ij s_ij,  u_ij = sum_m a_im b_jm,  s_ij = sum_m a_im b_jm exp(c_m d2_ij),
 * with a = w(x1) (n1 x M), b = w(x2) passed transposed (bT: M x n2), d2 the squared distances (n1 x n2) and
 * c_m = -1 / (2 l_m^2). Nothing of size M x n1 x n2 is ever stored: the backward recomputes the exponentials.
 * Row-major float64. Each call does the rows [r0, r1) (callers split rows across threads). With sym (x1 == x2)
 * only the entries j >= i are computed. Compiled at first use by onlinegp.kernels.native. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* exp(x) for x <= 0 within ~1 ulp, vectorisable: x = k ln2 + r with |r| <= ln2 / 2, exp(r) by its degree-12
 * Taylor polynomial (truncation < 2e-16 relative), 2^k built in the exponent bits; 0 below -708 (no subnormals). */
#pragma omp declare simd notinbranch
static inline double exp_nonpositive(double x) {
    const double shifter = 6755399441055744.0; /* 1.5 * 2^52: x + shifter keeps round(x) in the low bits */
    const int underflow = x < -708.0;
    x = underflow ? -708.0 : x;
    const double kd = x * 1.4426950408889634 + shifter;
    int64_t ki;
    memcpy(&ki, &kd, sizeof ki);
    const double k = kd - shifter;
    const double r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10; /* ln2 hi + lo */
    double p = 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    const int64_t bits = (ki << 52) + ((int64_t)1023 << 52);
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return underflow ? 0.0 : p * scale;
}

/* One row's u_j and s_j (n entries; bT has row stride ldb); the exponentials go to e[m * n + j] when e != NULL. */
static void row_terms(long n, long M, long ldb, const double *restrict a, const double *restrict bT,
                      const double *restrict d2, const double *restrict coef,
                      double *restrict u, double *restrict s, double *restrict e) {
    #pragma omp simd
    for (long j = 0; j < n; j++) { u[j] = 0.0; s[j] = 0.0; }
    for (long m = 0; m < M; m++) {
        const double am = a[m], cm = coef[m];
        const double *restrict bm = bT + m * ldb;
        if (e) {
            double *restrict em = e + m * n;
            #pragma omp simd
            for (long j = 0; j < n; j++) {
                const double x = exp_nonpositive(cm * d2[j]), ab = am * bm[j];
                em[j] = x;
                u[j] += ab;
                s[j] += ab * x;
            }
        } else {
            #pragma omp simd
            for (long j = 0; j < n; j++) {
                const double ab = am * bm[j];
                u[j] += ab;
                s[j] += ab * exp_nonpositive(cm * d2[j]);
            }
        }
    }
}

/* out (n1 x n2) = k, rows [r0, r1) (with sym only j >= i; the caller mirrors). Returns 0, or 1 if out of memory. */
int ak_forward(long n1, long n2, long M, const double *a, const double *bT, const double *d2, const double *coef,
               double *out, long r0, long r1, int sym) {
    double *u = malloc(sizeof(double) * (n2 > 0 ? n2 : 1));
    if (!u) return 1;
    for (long i = r0; i < r1; i++) {
        const long j0 = sym ? i : 0, n = n2 - j0;
        double *restrict o = out + i * n2 + j0;
        row_terms(n, M, n2, a + i * M, bT + j0, d2 + i * n2 + j0, coef, u, o, NULL);
        #pragma omp simd
        for (long j = 0; j < n; j++) o[j] *= u[j];
    }
    free(u);
    return 0;
}

/* The gradient for an upstream gradient G (n1 x n2; with sym it must be G + G^T):
 *     dk_ij/da_im = b_jm (s_ij + u_ij e_mij),  dk_ij/db_jm = a_im (s_ij + u_ij e_mij),
 *     dk_ij/dd2_ij = u_ij sum_m a_im b_jm c_m e_mij.
 * Writes rows [r0, r1) of ga (n1 x M) and of gd2 (n1 x n2, skipped when NULL); adds the b terms into gbT (M x n2;
 * with sym, those of the entries j > i, which the caller adds to ga transposed). Returns 0, or 1 if out of memory. */
int ak_backward(long n1, long n2, long M, const double *a, const double *bT, const double *d2, const double *coef,
                const double *G, double *ga, double *gbT, double *gd2, long r0, long r1, int sym) {
    double *buf = malloc(sizeof(double) * (n2 > 0 ? n2 : 1) * (M + 3));
    if (!buf) return 1;
    double *u = buf, *s = buf + n2, *t = buf + 2 * n2, *e = buf + 3 * n2;
    for (long i = r0; i < r1; i++) {
        const long j0 = sym ? i : 0, n = n2 - j0;
        const double *restrict ai = a + i * M, *restrict g = G + i * n2 + j0;
        row_terms(n, M, n2, ai, bT + j0, d2 + i * n2 + j0, coef, u, s, e);
        if (gd2) {
            double *restrict q = gd2 + i * n2 + j0;
            #pragma omp simd
            for (long j = 0; j < n; j++) q[j] = 0.0;
            for (long m = 0; m < M; m++) {
                const double w = ai[m] * coef[m];
                const double *restrict bm = bT + m * n2 + j0, *restrict em = e + m * n;
                #pragma omp simd
                for (long j = 0; j < n; j++) q[j] += w * bm[j] * em[j];
            }
            #pragma omp simd
            for (long j = 0; j < n; j++) q[j] *= g[j] * u[j];
        }
        #pragma omp simd
        for (long j = 0; j < n; j++) { t[j] = g[j] * u[j]; s[j] *= g[j]; }
        const long first = sym ? 1 : 0; /* with sym the diagonal entry counts once, in ga */
        for (long m = 0; m < M; m++) {
            const double *restrict bm = bT + m * n2 + j0, *restrict em = e + m * n;
            double *restrict gm = gbT + m * n2 + j0;
            const double am = ai[m];
            double acc = (sym && n > 0) ? (s[0] + t[0] * em[0]) * bm[0] : 0.0;
            #pragma omp simd reduction(+:acc)
            for (long j = first; j < n; j++) {
                const double f = s[j] + t[j] * em[j];
                acc += f * bm[j];
                gm[j] += f * am;
            }
            ga[i * M + m] = acc;
        }
    }
    free(buf);
    return 0;
}

/* out (n1 x n2) = squared distances between the rows of x1 (n1 x D) and the columns of x2T (D x n2), rows
 * [r0, r1), summed over dimensions from exact differences (not the expanded |x|^2 - 2 x.y + |y|^2). */
void sq_distances(long n1, long n2, long D, const double *x1, const double *x2T, double *out, long r0, long r1) {
    for (long i = r0; i < r1; i++) {
        double *restrict o = out + i * n2;
        #pragma omp simd
        for (long j = 0; j < n2; j++) o[j] = 0.0;
        for (long d = 0; d < D; d++) {
            const double xd = x1[i * D + d];
            const double *restrict col = x2T + d * n2;
            #pragma omp simd
            for (long j = 0; j < n2; j++) {
                const double diff = xd - col[j];
                o[j] += diff * diff;
            }
        }
    }
}

/* Copy the upper triangle of the n x n matrix a into its lower triangle (blocked, for the cache). */
void mirror_upper(long n, double *a) {
    const long block = 64;
    for (long ib = 0; ib < n; ib += block)
        for (long jb = 0; jb <= ib; jb += block)
            for (long i = ib; i < ib + block && i < n; i++)
                for (long j = jb; j < jb + block && j < i; j++)
                    a[i * n + j] = a[j * n + i];
}
