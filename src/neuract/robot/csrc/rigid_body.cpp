// Rigid-body dynamics of a fixed-base tree of hinge/slide joints and their vector-Jacobian
// products, one sample after another over a batch (neuract.robot.native loads this file with
// ctypes; no torch headers). Same conventions and formulas as the torch reference in
// neuract/robot/{kinematics,rigid_body,dynamics_backward}.py: every spatial quantity is in
// world axes at the world origin, motion [w, v], force [n, f], link inertias as
// (m, h = m c, I about the origin). Arithmetic is in double whatever the input type.
//
// nr_forward / nr_backward: accelerations
//   qdd = Mh^-1 (tau - b(q, qd) + passive(qd)),  Mh = M(q) + diag(armature + dt_i D)
//   u = Mh^-1 g;  grad tau = u;  grad q = -(d RNEA / d q)^T u (at the computed qdd);
//   grad qd = -(d RNEA / d qd)^T u + (d passive / d qd) u   (implicit-function VJP)
// nr_mass_bias / nr_mass_bias_backward: M(q) (CRBA, armature included) and b(q, qd), and the
//   gradients of <gM, M> + <gb, b> with respect to q and qd.
// The VJPs are reverse mode by hand through the RNEA and the CRBA; their dependence on q goes
// through the joint screws and world inertias (d/dq_j moves the subtree of j along the unit
// screw S_j), as in the torch path's _ScrewKinematics.

#include <cmath>
#include <cstdint>
#include <vector>

namespace {

struct V3 {
  double x, y, z;
};
inline V3 operator+(V3 a, V3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
inline V3 operator-(V3 a, V3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
inline V3 operator*(double s, V3 a) { return {s * a.x, s * a.y, s * a.z}; }
inline V3& operator+=(V3& a, V3 b) {
  a.x += b.x; a.y += b.y; a.z += b.z;
  return a;
}
inline double dot(V3 a, V3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
inline V3 cross(V3 a, V3 b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}

struct M3 {
  double a[9];  // row-major
};
inline V3 mul(const M3& m, V3 v) {
  return {m.a[0] * v.x + m.a[1] * v.y + m.a[2] * v.z, m.a[3] * v.x + m.a[4] * v.y + m.a[5] * v.z,
          m.a[6] * v.x + m.a[7] * v.y + m.a[8] * v.z};
}

// spatial vector: angular / linear (motion [w, v]) or moment / force (force [n, f])
struct S6 {
  V3 a, l;
};
inline S6 operator+(S6 p, S6 q) { return {p.a + q.a, p.l + q.l}; }
inline S6& operator+=(S6& p, S6 q) {
  p.a += q.a; p.l += q.l;
  return p;
}
inline S6 operator*(double s, S6 p) { return {s * p.a, s * p.l}; }
inline double dot(S6 p, S6 q) { return dot(p.a, q.a) + dot(p.l, q.l); }
// motion x motion
inline S6 crm(S6 m, S6 x) { return {cross(m.a, x.a), cross(m.a, x.l) + cross(m.l, x.a)}; }
// motion x* force
inline S6 crf(S6 m, S6 f) { return {cross(m.a, f.a) + cross(m.l, f.l), cross(m.a, f.l)}; }

struct Inertia {  // world axes, about the world origin
  double m;
  V3 h;
  M3 I;
};
// I x for motion x = [w, v]: [I w + h x v, m v - h x w] (a symmetric 6x6 map)
inline S6 imul(const Inertia& in, S6 x) {
  return {mul(in.I, x.a) + cross(in.h, x.l), in.m * x.l - cross(in.h, x.a)};
}

// layout of the constants array (double), n links:
// q_ref n | T_const 12n | T_cos 12n | T_sin 12n | T_slide 12n  (top 3 x 4 rows, row-major)
// | m n | h_l 3n | I_l 9n (link frame, about the joint origin) | armature n | damping n
// | frictionloss n | gravity 3
struct Consts {
  int n;
  const int32_t* parent;
  const int32_t* hinge;
  const double *q_ref, *Tc, *Tcos, *Tsin, *Tsl, *m, *hl, *Il, *arm, *damp, *fric, *grav;
  Consts(int n_, const int32_t* par, const int32_t* hin, const double* c)
      : n(n_), parent(par), hinge(hin) {
    q_ref = c;
    Tc = q_ref + n;
    Tcos = Tc + 12 * n;
    Tsin = Tcos + 12 * n;
    Tsl = Tsin + 12 * n;
    m = Tsl + 12 * n;
    hl = m + n;
    Il = hl + 3 * n;
    arm = Il + 9 * n;
    damp = arm + n;
    fric = damp + n;
    grav = fric + n;
  }
};

struct Work {
  int n;
  std::vector<M3> R;
  std::vector<V3> p;
  std::vector<S6> S, V, A, P, f, F, Fb, Ab, Vb, Sb, wr;
  std::vector<Inertia> W, Ic;
  std::vector<V3> hb, hc;
  std::vector<M3> Ib, Icb;
  std::vector<double> L, tmp, qdb, tauv;
  explicit Work(int n_)
      : n(n_), R(n_), p(n_), S(n_), V(n_), A(n_), P(n_), f(n_), F(n_), Fb(n_), Ab(n_), Vb(n_),
        Sb(n_), wr(n_), W(n_), Ic(n_), hb(n_), hc(n_), Ib(n_), Icb(n_), L(n_ * n_), tmp(n_),
        qdb(n_), tauv(n_) {}
};

// link poses, joint screws S and world inertias W at q
void kinematics(const Consts& c, Work& w, const double* q) {
  const int n = c.n;
  for (int i = 0; i < n; ++i) {
    const double th = q[i] - c.q_ref[i], co = std::cos(th), si = std::sin(th);
    double T[12];
    for (int k = 0; k < 12; ++k)
      T[k] = c.Tc[12 * i + k] + co * c.Tcos[12 * i + k] + si * c.Tsin[12 * i + k] +
             th * c.Tsl[12 * i + k];
    M3 Rl = {{T[0], T[1], T[2], T[4], T[5], T[6], T[8], T[9], T[10]}};
    V3 pl = {T[3], T[7], T[11]};
    const int par = c.parent[i];
    if (par < 0) {
      w.R[i] = Rl;
      w.p[i] = pl;
    } else {
      const M3& Rp = w.R[par];
      M3 R;
      for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 3; ++k)
          R.a[3 * r + k] = Rp.a[3 * r] * Rl.a[k] + Rp.a[3 * r + 1] * Rl.a[3 + k] +
                           Rp.a[3 * r + 2] * Rl.a[6 + k];
      w.R[i] = R;
      w.p[i] = mul(Rp, pl) + w.p[par];
    }
    const M3& R = w.R[i];
    const V3 z = {R.a[2], R.a[5], R.a[8]}, pi = w.p[i];
    w.S[i] = c.hinge[i] ? S6{z, cross(pi, z)} : S6{{0.0, 0.0, 0.0}, z};
    // h = m p + R h_l; I_O = R I_l R^T + (p . (h + R h_l)) 1 - p h^T - (R h_l) p^T
    const double mi = c.m[i];
    const V3 hr = mul(R, {c.hl[3 * i], c.hl[3 * i + 1], c.hl[3 * i + 2]});
    const V3 h = mi * pi + hr;
    const double* Il = c.Il + 9 * i;
    double RI[9];
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 3; ++k)
        RI[3 * r + k] =
            R.a[3 * r] * Il[k] + R.a[3 * r + 1] * Il[3 + k] + R.a[3 * r + 2] * Il[6 + k];
    const double sc = dot(pi, h + hr);
    const double pv[3] = {pi.x, pi.y, pi.z}, hv[3] = {h.x, h.y, h.z}, hrv[3] = {hr.x, hr.y, hr.z};
    Inertia& in = w.W[i];
    in.m = mi;
    in.h = h;
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 3; ++k)
        in.I.a[3 * r + k] = RI[3 * r] * R.a[3 * k] + RI[3 * r + 1] * R.a[3 * k + 1] +
                            RI[3 * r + 2] * R.a[3 * k + 2] + (r == k ? sc : 0.0) -
                            pv[r] * hv[k] - hrv[r] * pv[k];
  }
}

// RNEA: tau = S . F, keeps V, A, P = I V, f, F in w; qdd may be null (zero)
void rnea(const Consts& c, Work& w, const double* qd, const double* qdd, double* tau) {
  const int n = c.n;
  const S6 a0 = {{0.0, 0.0, 0.0}, {-c.grav[0], -c.grav[1], -c.grav[2]}};
  for (int i = 0; i < n; ++i) {
    const int par = c.parent[i];
    const S6 X = qd[i] * w.S[i];
    const S6 Vp = par < 0 ? S6{{0, 0, 0}, {0, 0, 0}} : w.V[par];
    const S6 Ap = par < 0 ? a0 : w.A[par];
    w.V[i] = Vp + X;
    w.A[i] = Ap + crm(w.V[i], X);
    if (qdd) w.A[i] += qdd[i] * w.S[i];
    w.P[i] = imul(w.W[i], w.V[i]);
    w.f[i] = imul(w.W[i], w.A[i]) + crf(w.V[i], w.P[i]);
    w.F[i] = w.f[i];
  }
  for (int i = n - 1; i >= 0; --i) {
    const int par = c.parent[i];
    if (par >= 0) w.F[par] += w.F[i];
    tau[i] = dot(w.S[i], w.F[i]);
  }
}

// composite inertias: Ic_i = sum of W_l over the subtree of i
void composite(const Consts& c, Work& w) {
  const int n = c.n;
  for (int i = 0; i < n; ++i) w.Ic[i] = w.W[i];
  for (int i = n - 1; i >= 0; --i) {
    const int par = c.parent[i];
    if (par < 0) continue;
    Inertia& d = w.Ic[par];
    const Inertia& s = w.Ic[i];
    d.m += s.m;
    d.h += s.h;
    for (int k = 0; k < 9; ++k) d.I.a[k] += s.I.a[k];
  }
}

// lower triangle of M + diag(armature + dt_i damping) (CRBA) into M (row-major, rest 0)
void mass_lower(const Consts& c, const Work& w, double implicit_dt, double* M) {
  const int n = c.n;
  for (int k = 0; k < n * n; ++k) M[k] = 0.0;
  for (int i = 0; i < n; ++i) {
    const S6 Fi = imul(w.Ic[i], w.S[i]);
    M[i * n + i] = dot(Fi, w.S[i]) + c.arm[i] + implicit_dt * c.damp[i];
    for (int j = c.parent[i]; j >= 0; j = c.parent[j]) M[i * n + j] = dot(Fi, w.S[j]);
  }
}

// in-place Cholesky of the lower triangle (row-major): M = L L^T; false if not SPD
bool cholesky(int n, double* M) {
  for (int j = 0; j < n; ++j) {
    double d = M[j * n + j];
    for (int k = 0; k < j; ++k) d -= M[j * n + k] * M[j * n + k];
    if (!(d > 0.0)) return false;
    d = std::sqrt(d);
    M[j * n + j] = d;
    for (int i = j + 1; i < n; ++i) {
      double s = M[i * n + j];
      for (int k = 0; k < j; ++k) s -= M[i * n + k] * M[j * n + k];
      M[i * n + j] = s / d;
    }
  }
  return true;
}

// Mh = M + diag(armature + dt_i damping), Cholesky factor into w.L (lower); false if not SPD
bool mass_matrix_cholesky(const Consts& c, Work& w, double implicit_dt) {
  composite(c, w);
  mass_lower(c, w, implicit_dt, w.L.data());
  return cholesky(c.n, w.L.data());
}

void chol_solve(const Work& w, double* x) {  // x <- (L L^T)^-1 x
  const int n = w.n;
  const double* L = w.L.data();
  for (int i = 0; i < n; ++i) {
    double s = x[i];
    for (int k = 0; k < i; ++k) s -= L[i * n + k] * x[k];
    x[i] = s / L[i * n + i];
  }
  for (int i = n - 1; i >= 0; --i) {
    double s = x[i];
    for (int k = i + 1; k < n; ++k) s -= L[k * n + i] * x[k];
    x[i] = s / L[i * n + i];
  }
}

inline double passive(const Consts& c, int i, double qd, double eps) {
  return -c.damp[i] * qd - c.fric[i] * std::tanh(qd / eps);
}

void clear_bars(Work& w) {
  for (int i = 0; i < w.n; ++i) {
    w.Sb[i] = S6{{0, 0, 0}, {0, 0, 0}};
    w.hb[i] = V3{0, 0, 0};
    for (int k = 0; k < 9; ++k) w.Ib[i].a[k] = 0.0;
  }
}

// VJP of tau = RNEA(q, qd, qdd) with weight y: adds y^T dtau/dqd to gqd and the gradients of
// y^T tau with respect to the screws S and world inertias (h, I) to w.Sb, w.hb, w.Ib (turned
// into a q gradient by screw_vjp). rnea() must have run at (q, qd, qdd) on w.
void rnea_vjp(const Consts& c, Work& w, const double* qd, const double* qdd, const double* y,
              double* gqd) {
  const int n = c.n;
  for (int i = 0; i < n; ++i) {
    const int par = c.parent[i];
    // tau_i = S_i . F_i, F_i = f_i + sum of children's F: F_bar_i = y_i S_i + F_bar_parent
    w.Fb[i] = y[i] * w.S[i];
    if (par >= 0) w.Fb[i] += w.Fb[par];
    w.Sb[i] += y[i] * w.F[i];
    const S6 yb = w.Fb[i];
    const S6 Vi = w.V[i], Ai = w.A[i], Pi = w.P[i];
    const Inertia& in = w.W[i];
    // f = I A + V x* P, P = I V
    w.Ab[i] = imul(in, yb);
    V3 hb = cross(Ai.l, yb.a) - cross(Ai.a, yb.l);
    M3 Ib;
    const double yn[3] = {yb.a.x, yb.a.y, yb.a.z}, aw[3] = {Ai.a.x, Ai.a.y, Ai.a.z};
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 3; ++k) Ib.a[3 * r + k] = yn[r] * aw[k];
    const S6 Pb = {cross(yb.a, Vi.a), cross(yb.a, Vi.l) + cross(yb.l, Vi.a)};
    S6 Vb = {cross(Pi.a, yb.a) + cross(Pi.l, yb.l), cross(Pi.l, yb.a)};
    Vb += imul(in, Pb);
    hb += cross(Vi.l, Pb.a) - cross(Vi.a, Pb.l);
    const double pn[3] = {Pb.a.x, Pb.a.y, Pb.a.z}, vw[3] = {Vi.a.x, Vi.a.y, Vi.a.z};
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 3; ++k) Ib.a[3 * r + k] += pn[r] * vw[k];
    w.Vb[i] = Vb;
    w.hb[i] += hb;
    for (int k = 0; k < 9; ++k) w.Ib[i].a[k] += Ib.a[k];
  }
  // A_i = A_parent + S_i qdd_i + V_i x (S_i qd_i): A_bar accumulates over the subtree
  for (int i = n - 1; i >= 0; --i) {
    const int par = c.parent[i];
    if (par >= 0) w.Ab[par] += w.Ab[i];
  }
  for (int i = 0; i < n; ++i) {
    const S6 yb = w.Ab[i], Vi = w.V[i];
    const S6 X = qd[i] * w.S[i];
    if (qdd) w.Sb[i] += qdd[i] * yb;
    w.Vb[i] += S6{cross(X.a, yb.a) + cross(X.l, yb.l), cross(X.a, yb.l)};
    const S6 Xb = {cross(yb.a, Vi.a) + cross(yb.l, Vi.l), cross(yb.l, Vi.a)};
    w.Sb[i] += qd[i] * Xb;
    gqd[i] += dot(w.S[i], Xb);
  }
  // V_i = V_parent + S_i qd_i
  for (int i = n - 1; i >= 0; --i) {
    const int par = c.parent[i];
    if (par >= 0) w.Vb[par] += w.Vb[i];
  }
  for (int i = 0; i < n; ++i) {
    w.Sb[i] += qd[i] * w.Vb[i];
    gqd[i] += dot(w.S[i], w.Vb[i]);
  }
}

// gradient of sum_ij G_ij M_ij (M = CRBA mass matrix, both triangles) with respect to the
// screws and world inertias, added to w.Sb, w.hb, w.Ib; composite() must have run on w.
// M_ij = S_j . Ic_i S_i for j an ancestor-or-self of i: with Y_i = sum_j c_ij S_j
// (c_ii = G_ii, c_ij = G_ij + G_ji), the sum is sum_i <Y_i, Ic_i S_i>.
void crba_vjp(const Consts& c, Work& w, const double* G) {
  const int n = c.n;
  for (int i = 0; i < n; ++i) {
    const S6 Si = w.S[i];
    const double cii = G[i * n + i];
    S6 Y = cii * Si;
    for (int j = c.parent[i]; j >= 0; j = c.parent[j]) Y += (G[i * n + j] + G[j * n + i]) * w.S[j];
    const S6 Fi = imul(w.Ic[i], Si);
    w.Sb[i] += imul(w.Ic[i], Y);
    w.Sb[i] += cii * Fi;
    for (int j = c.parent[i]; j >= 0; j = c.parent[j])
      w.Sb[j] += (G[i * n + j] + G[j * n + i]) * Fi;
    // d <Y, Ic X> / d Ic for X = S_i: I_O gets Y_w X_w^T, h gets X_v x Y_w - X_w x Y_v
    w.hc[i] = cross(Si.l, Y.a) - cross(Si.a, Y.l);
    const double yw[3] = {Y.a.x, Y.a.y, Y.a.z}, xw[3] = {Si.a.x, Si.a.y, Si.a.z};
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 3; ++k) w.Icb[i].a[3 * r + k] = yw[r] * xw[k];
  }
  // Ic_i sums the links of its subtree: link l collects its ancestors-or-self's gradients
  for (int l = 0; l < n; ++l) {
    const int par = c.parent[l];
    if (par >= 0) {
      w.hc[l] += w.hc[par];
      for (int k = 0; k < 9; ++k) w.Icb[l].a[k] += w.Icb[par].a[k];
    }
    w.hb[l] += w.hc[l];
    for (int k = 0; k < 9; ++k) w.Ib[l].a[k] += w.Icb[l].a[k];
  }
}

// (S, h, I) gradients in w -> q gradient (added to gq): each link's wrench under the unit
// screws, summed over subtrees
void screw_vjp(const Consts& c, Work& w, double* gq) {
  const int n = c.n;
  for (int i = 0; i < n; ++i) {
    const S6 s = w.S[i], gs = w.Sb[i];
    const Inertia& in = w.W[i];
    const V3 gh = w.hb[i];
    const M3& gI = w.Ib[i];
    double G2[9];
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 3; ++k) G2[3 * r + k] = gI.a[3 * r + k] + gI.a[3 * k + r];
    double B2[9];
    for (int r = 0; r < 3; ++r)
      for (int k = 0; k < 3; ++k)
        B2[3 * r + k] = G2[3 * r] * in.I.a[k] + G2[3 * r + 1] * in.I.a[3 + k] +
                        G2[3 * r + 2] * in.I.a[6 + k];
    const V3 kap = {B2[7] - B2[5], B2[2] - B2[6], B2[3] - B2[1]};
    const M3 G2m = {{G2[0], G2[1], G2[2], G2[3], G2[4], G2[5], G2[6], G2[7], G2[8]}};
    const V3 g2h = mul(G2m, in.h);
    const double tr = gI.a[0] + gI.a[4] + gI.a[8];
    const V3 ang = cross(s.a, gs.a) + cross(s.l, gs.l) + cross(in.h, gh) + kap;
    const V3 lin = cross(s.a, gs.l) - g2h + in.m * gh + (2.0 * tr) * in.h;
    w.wr[i] = S6{ang, lin};
  }
  for (int i = n - 1; i >= 0; --i) {
    const int par = c.parent[i];
    gq[i] += dot(w.S[i], w.wr[i]);
    if (par >= 0) w.wr[par] += w.wr[i];
  }
}

template <typename T>
int forward_impl(int n, const int32_t* parent, const int32_t* hinge, const double* consts,
                 int64_t B, const T* q, const T* qd, const T* tau, T* qdd, int passive_on,
                 double eps, double implicit_dt) {
  const Consts c(n, parent, hinge, consts);
  Work w(n);
  std::vector<double> qv(n), qdv(n), b(n);
  int bad = 0;
  for (int64_t s = 0; s < B; ++s) {
    const int64_t o = s * n;
    for (int i = 0; i < n; ++i) {
      qv[i] = q[o + i];
      qdv[i] = qd[o + i];
    }
    kinematics(c, w, qv.data());
    rnea(c, w, qdv.data(), nullptr, b.data());
    if (!mass_matrix_cholesky(c, w, implicit_dt)) {
      bad = 1;
      for (int i = 0; i < n; ++i) qdd[o + i] = static_cast<T>(NAN);
      continue;
    }
    for (int i = 0; i < n; ++i) {
      double fi = static_cast<double>(tau[o + i]) - b[i];
      if (passive_on) fi += passive(c, i, qdv[i], eps);
      w.tmp[i] = fi;
    }
    chol_solve(w, w.tmp.data());
    for (int i = 0; i < n; ++i) qdd[o + i] = static_cast<T>(w.tmp[i]);
  }
  return bad;
}

template <typename T>
int backward_impl(int n, const int32_t* parent, const int32_t* hinge, const double* consts,
                  int64_t B, const T* q, const T* qd, const T* qdd, const T* g, T* gq, T* gqd,
                  T* gtau, int passive_on, double eps, double implicit_dt) {
  const Consts c(n, parent, hinge, consts);
  Work w(n);
  std::vector<double> qv(n), qdv(n), qddv(n), y(n), gqv(n), gqdv(n), tau(n);
  int bad = 0;
  for (int64_t s = 0; s < B; ++s) {
    const int64_t o = s * n;
    for (int i = 0; i < n; ++i) {
      qv[i] = q[o + i];
      qdv[i] = qd[o + i];
      qddv[i] = qdd[o + i];
      w.tmp[i] = g[o + i];
    }
    kinematics(c, w, qv.data());
    if (!mass_matrix_cholesky(c, w, implicit_dt)) {
      bad = 1;
      for (int i = 0; i < n; ++i) gq[o + i] = gqd[o + i] = gtau[o + i] = static_cast<T>(NAN);
      continue;
    }
    chol_solve(w, w.tmp.data());  // u
    rnea(c, w, qdv.data(), qddv.data(), tau.data());
    for (int i = 0; i < n; ++i) {
      y[i] = -w.tmp[i];
      gqv[i] = 0.0;
      gqdv[i] = 0.0;
    }
    clear_bars(w);
    rnea_vjp(c, w, qdv.data(), qddv.data(), y.data(), gqdv.data());
    screw_vjp(c, w, gqv.data());
    for (int i = 0; i < n; ++i) {
      const double u = w.tmp[i];
      double gd = gqdv[i];
      if (passive_on) {
        const double th = std::tanh(qdv[i] / eps);
        gd -= u * (c.damp[i] + c.fric[i] * (1.0 - th * th) / eps);
      }
      gq[o + i] = static_cast<T>(gqv[i]);
      gqd[o + i] = static_cast<T>(gd);
      gtau[o + i] = static_cast<T>(u);
    }
  }
  return bad;
}

// M(q) (armature included, both triangles) and b(q, qd) = RNEA(q, qd, 0)
template <typename T>
int mass_bias_impl(int n, const int32_t* parent, const int32_t* hinge, const double* consts,
                   int64_t B, const T* q, const T* qd, T* M, T* b) {
  const Consts c(n, parent, hinge, consts);
  Work w(n);
  std::vector<double> qv(n), qdv(n), bv(n);
  for (int64_t s = 0; s < B; ++s) {
    const int64_t o = s * n;
    for (int i = 0; i < n; ++i) {
      qv[i] = q[o + i];
      qdv[i] = qd[o + i];
    }
    kinematics(c, w, qv.data());
    rnea(c, w, qdv.data(), nullptr, bv.data());
    composite(c, w);
    mass_lower(c, w, 0.0, w.L.data());
    T* Ms = M + s * n * n;
    for (int i = 0; i < n; ++i) {
      b[o + i] = static_cast<T>(bv[i]);
      for (int j = 0; j <= i; ++j) {
        Ms[i * n + j] = Ms[j * n + i] = static_cast<T>(w.L[i * n + j]);
      }
    }
  }
  return 0;
}

// gradients of sum(gM * M) + sum(gb * b) with respect to q and qd (gM or gb may be null)
template <typename T>
int mass_bias_backward_impl(int n, const int32_t* parent, const int32_t* hinge,
                            const double* consts, int64_t B, const T* q, const T* qd,
                            const T* gM, const T* gb, T* gq, T* gqd) {
  const Consts c(n, parent, hinge, consts);
  Work w(n);
  std::vector<double> qv(n), qdv(n), bv(n), y(n), G(n * n), gqv(n), gqdv(n);
  for (int64_t s = 0; s < B; ++s) {
    const int64_t o = s * n;
    for (int i = 0; i < n; ++i) {
      qv[i] = q[o + i];
      qdv[i] = qd[o + i];
      gqv[i] = gqdv[i] = 0.0;
    }
    kinematics(c, w, qv.data());
    clear_bars(w);
    if (gb) {
      for (int i = 0; i < n; ++i) y[i] = gb[o + i];
      rnea(c, w, qdv.data(), nullptr, bv.data());
      rnea_vjp(c, w, qdv.data(), nullptr, y.data(), gqdv.data());
    }
    if (gM) {
      for (int k = 0; k < n * n; ++k) G[k] = gM[s * n * n + k];
      composite(c, w);
      crba_vjp(c, w, G.data());
    }
    screw_vjp(c, w, gqv.data());
    for (int i = 0; i < n; ++i) {
      gq[o + i] = static_cast<T>(gqv[i]);
      gqd[o + i] = static_cast<T>(gqdv[i]);
    }
  }
  return 0;
}

}  // namespace

extern "C" {

int nr_abi_version() { return 2; }

int nr_forward_f64(int n, const int32_t* parent, const int32_t* hinge, const double* consts,
                   int64_t B, const double* q, const double* qd, const double* tau, double* qdd,
                   int passive_on, double eps, double implicit_dt) {
  return forward_impl<double>(n, parent, hinge, consts, B, q, qd, tau, qdd, passive_on, eps,
                              implicit_dt);
}

int nr_forward_f32(int n, const int32_t* parent, const int32_t* hinge, const double* consts,
                   int64_t B, const float* q, const float* qd, const float* tau, float* qdd,
                   int passive_on, double eps, double implicit_dt) {
  return forward_impl<float>(n, parent, hinge, consts, B, q, qd, tau, qdd, passive_on, eps,
                             implicit_dt);
}

int nr_backward_f64(int n, const int32_t* parent, const int32_t* hinge, const double* consts,
                    int64_t B, const double* q, const double* qd, const double* qdd,
                    const double* g, double* gq, double* gqd, double* gtau, int passive_on,
                    double eps, double implicit_dt) {
  return backward_impl<double>(n, parent, hinge, consts, B, q, qd, qdd, g, gq, gqd, gtau,
                               passive_on, eps, implicit_dt);
}

int nr_backward_f32(int n, const int32_t* parent, const int32_t* hinge, const double* consts,
                    int64_t B, const float* q, const float* qd, const float* qdd, const float* g,
                    float* gq, float* gqd, float* gtau, int passive_on, double eps,
                    double implicit_dt) {
  return backward_impl<float>(n, parent, hinge, consts, B, q, qd, qdd, g, gq, gqd, gtau,
                              passive_on, eps, implicit_dt);
}

int nr_mass_bias_f64(int n, const int32_t* parent, const int32_t* hinge, const double* consts,
                     int64_t B, const double* q, const double* qd, double* M, double* b) {
  return mass_bias_impl<double>(n, parent, hinge, consts, B, q, qd, M, b);
}

int nr_mass_bias_f32(int n, const int32_t* parent, const int32_t* hinge, const double* consts,
                     int64_t B, const float* q, const float* qd, float* M, float* b) {
  return mass_bias_impl<float>(n, parent, hinge, consts, B, q, qd, M, b);
}

int nr_mass_bias_backward_f64(int n, const int32_t* parent, const int32_t* hinge,
                              const double* consts, int64_t B, const double* q, const double* qd,
                              const double* gM, const double* gb, double* gq, double* gqd) {
  return mass_bias_backward_impl<double>(n, parent, hinge, consts, B, q, qd, gM, gb, gq, gqd);
}

int nr_mass_bias_backward_f32(int n, const int32_t* parent, const int32_t* hinge,
                              const double* consts, int64_t B, const float* q, const float* qd,
                              const float* gM, const float* gb, float* gq, float* gqd) {
  return mass_bias_backward_impl<float>(n, parent, hinge, consts, B, q, qd, gM, gb, gq, gqd);
}

}  // extern "C"
