// What every deltafin compute shader shares: buffer references, the decode
// tables, the canonical lane tree, and division, square root, expf and tanhf
// with the CPU's bits (kernels/ops.cpp, kernels/portable_math.cpp).
//
// Exactness rules (docs/vulkan.md):
// - every float and double result a shader computes is held in a `precise`
//   variable, so SPIR-V marks its operations NoContraction: no driver may
//   fuse a multiply and an add the definition keeps apart, or reassociate;
//   the fused steps of the canonical order are explicit fma_rn() calls;
// - Vulkan lets division and square root be a few ulp off, so div_rn and
//   sqrt_rn below correct a first estimate with exact residuals until it is
//   the correctly rounded one;
// - Vulkan lets fma() be a multiply and an add (lavapipe's is: Mesa lowers
//   it), so fma_rn forms the fused result from doubles unless the device
//   check found the native one fused (the kNativeFma constant);
// - add, subtract, multiply, fma and conversions must be IEEE's, round to
//   nearest even, subnormals kept: the device probe (vulkan_device.cpp)
//   checks them before a device is used.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_buffer_reference2 : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Doubles { double v[]; };

// Set at pipeline creation (vulkan_device.cpp): true where the device's fma()
// was found fused, bit for bit std::fma, on the check's inputs.
layout(constant_id = 0) const bool kNativeFma = false;

// 2^m as a double (|m| < 1023).
double pow2_d(int m) { return packDouble2x32(uvec2(0u, uint(m + 1023) << 20)); }

double next_up_d(double d) {  // d finite, nonzero
  uvec2 p = unpackDouble2x32(d);
  const bool neg = (p.y >> 31) != 0u;
  if (!neg) { p.x += 1u; if (p.x == 0u) p.y += 1u; }
  else { if (p.x == 0u) p.y -= 1u; p.x -= 1u; }
  return packDouble2x32(p);
}
double next_down_d(double d) { return -next_up_d(-d); }

// a b + c rounded once (IEEE fma). Without a fused fma: a b is exact in
// double (48 bits); s = a b + c rounded to double, e its exact error
// (Knuth's TwoSum); a nonzero e sets s's last bit toward it (round to odd,
// a sticky bit), after which rounding s to float rounds the exact sum.
float fma_rn(float a, float b, float c) {
  if (kNativeFma) {
    precise float r = fma(a, b, c);
    return r;
  }
  precise double p = double(a) * double(b);
  precise double s = p + double(c);
  if (isinf(s) || isnan(s) || s == 0.0LF) {
    precise float r = float(s);
    if (s == 0.0LF) r = a * b + c;  // exact zero: the sign as IEEE's fma gives it
    return r;
  }
  precise double bb = s - p;
  precise double e = (p - (s - bb)) + (double(c) - bb);
  if (e != 0.0LF && (unpackDouble2x32(s).x & 1u) == 0u) s = e > 0.0LF ? next_up_d(s) : next_down_d(s);
  return float(s);
}

// The decode tables and constants, uploaded once from the CPU's own arrays
// (vulkan_backend.cpp, TableLayout): the same values by construction.
const uint kTabExp2 = 0;      // doubles: 2^(j/32), j < 32 (portable_math.cpp)
const uint kTabExpConst = 32; // doubles: 32/ln2, ln2/32 high, ln2/32 low, 1/6, 1/24, 1/120
const uint kTabE2M1 = 0;      // floats (after the doubles): kE2M1Signed[16]
const uint kTabE8M0 = 16;     // kE8M0Scale[256]
const uint kTabE4M3 = 272;    // kE4M3[256]
const uint kTabInt4 = 528;    // kInt4Signed[16]

uint bf16_bits_at(Words w, uint e) {
  const uint word = w.v[e >> 1];
  return (e & 1u) == 0u ? (word & 0xFFFFu) : (word >> 16);
}
float bf16_at(Words w, uint e) { return uintBitsToFloat(bf16_bits_at(w, e) << 16); }
uint byte_at(Words w, uint e) { return (w.v[e >> 2] >> (8u * (e & 3u))) & 0xFFu; }

// The fixed tree over 32 lane accumulators (kernels/ops_scalar.cpp lane_tree).
float lane_tree(float a[32]) {
  precise float b[16];
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 4; ++l) b[4 * j + l] = a[8 * j + l] + a[8 * j + 4 + l];
  precise float c[8];
  for (int j = 0; j < 2; ++j)
    for (int l = 0; l < 4; ++l) c[4 * j + l] = b[4 * (2 * j) + l] + b[4 * (2 * j + 1) + l];
  precise float v[4];
  for (int l = 0; l < 4; ++l) v[l] = c[l] + c[4 + l];
  precise float r = (v[0] + v[1]) + (v[2] + v[3]);
  return r;
}

float next_up(float f) {  // f finite
  const uint u = floatBitsToUint(f);
  if (u == 0x80000000u) return uintBitsToFloat(1u);
  return (u >> 31) == 0u ? uintBitsToFloat(u + 1u) : uintBitsToFloat(u - 1u);
}
float next_down(float f) { return -next_up(-f); }

// |a - c b| as a double: exact when c b (48 significant bits) is near a.
double residual(float a, float b, float c) {
  precise double r = double(a) - double(c) * double(b);  // c b is exact in double
  return abs(r);
}

// a / b rounded to nearest even (an exact midpoint cannot occur).
float div_rn(float a, float b) {
  precise double q = double(a) / double(b);
  precise float f = float(q);
  if (isinf(f) || isnan(f) || f == 0.0 || isinf(a) || isinf(b) || b == 0.0) return f;
  for (int i = 0; i < 3; ++i) {
    const double r = residual(a, b, f);
    const float up = next_up(f), down = next_down(f);
    if (!isinf(up) && residual(a, b, up) < r) f = up;
    else if (!isinf(down) && residual(a, b, down) < r) f = down;
    else break;
  }
  return f;
}

// sqrt(x) rounded to nearest even: s is right when x lies between the squares
// of the midpoints around it (25-bit midpoints: their squares are exact in
// double; x cannot equal one).
float sqrt_rn(float x) {
  if (!(x > 0.0) || isinf(x)) return sqrt(x);
  precise float s = float(sqrt(double(x)));
  for (int i = 0; i < 3; ++i) {
    const float up = next_up(s), down = next_down(s);
    precise double mid_hi = (double(s) + double(up)) * 0.5LF;
    precise double mid_lo = (double(s) + double(down)) * 0.5LF;
    precise double over = mid_hi * mid_hi - double(x);  // 25-bit midpoints: exact squares
    precise double under = mid_lo * mid_lo - double(x);
    if (over <= 0.0LF) s = up;
    else if (under > 0.0LF) s = down;
    else break;
  }
  return s;
}

// The exact product a b = hi + lo of two doubles (Dekker's TwoProduct by
// Veltkamp splitting: plain multiplies and adds, no fma).
void two_prod(double a, double b, out double hi, out double lo) {
  const double split = 134217729.0LF;  // 2^27 + 1
  precise double ca = split * a, cb = split * b;
  precise double ah = ca - (ca - a), bh = cb - (cb - b);
  precise double al = a - ah, bl = b - bh;
  precise double h = a * b;
  precise double l = ((ah * bh - h) + ah * bl + al * bh) + al * bl;
  hi = h;
  lo = l;
}

// |a - q b|, exact to one rounding (a - hi is exact for q near a / b).
double residual_d(double a, double b, double q) {
  double hi, lo;
  two_prod(q, b, hi, lo);
  precise double r = (a - hi) - lo;
  return abs(r);
}

// a / b in double, rounded to nearest even, for the finite, nonzero,
// well-scaled quotients portable_tanhf forms: the candidate nearest a / b
// has the smallest residual |a - c b|.
double ddiv_rn(double a, double b) {
  precise double q = a / b;
  for (int i = 0; i < 3; ++i) {
    const double r = residual_d(a, b, q);
    const double up = next_up_d(q), down = next_down_d(q);
    if (residual_d(a, b, up) < r) q = up;
    else if (residual_d(a, b, down) < r) q = down;
    else break;
  }
  return q;
}


// portable_math.cpp's exp_reduced, operation for operation.
double exp_reduced(Doubles tab, double y) {
  const double inv_step = tab.v[kTabExpConst + 0], step_hi = tab.v[kTabExpConst + 1];
  const double step_lo = tab.v[kTabExpConst + 2];
  const double c6 = tab.v[kTabExpConst + 3], c24 = tab.v[kTabExpConst + 4], c120 = tab.v[kTabExpConst + 5];
  const double kRound = 6755399441055744.0LF;  // 1.5 * 2^52
  precise double kd = (y * inv_step + kRound) - kRound;
  precise double r = (y - kd * step_hi) - kd * step_lo;
  precise double p = 1.0LF + r * (1.0LF + r * (0.5LF + r * (c6 + r * (c24 + r * c120))));
  const int k = int(kd);
  const int j = k & 31;
  precise double e = tab.v[kTabExp2 + j] * p * pow2_d((k - j) / 32);
  return e;
}

float portable_expf(Doubles tab, float x) {
  if (isnan(x)) return x;
  const double y = double(x);
  if (y > 89.0LF) return uintBitsToFloat(0x7F800000u);
  if (y < -104.0LF) return 0.0;
  return float(exp_reduced(tab, y));
}

float portable_tanhf(Doubles tab, float x) {
  if (isnan(x)) return x;
  precise double a = abs(double(x));
  precise double t;
  if (a < 0.000244140625LF) {  // 2^-12
    precise double cube = a * a * a;
    t = a - ddiv_rn(cube, 3.0LF);
  } else if (a > 9.5LF) {
    t = 1.0LF;
  } else {
    precise double e = exp_reduced(tab, 2.0LF * a);
    t = ddiv_rn(e - 1.0LF, e + 1.0LF);
  }
  const float r = float(t);
  return (floatBitsToUint(x) >> 31) != 0u ? -r : r;
}

float sigmoid_f(Doubles tab, float x) {
  precise float den = 1.0 + portable_expf(tab, -x);
  return div_rn(1.0, den);
}

float silu_f(Doubles tab, float x) {
  precise float r = x * sigmoid_f(tab, x);
  return r;
}

// kernels/ops_scalar.cpp situ_scalar, step for step.
float situ_f(Doubles tab, float g, float u, float beta, float beta_lin) {
  precise float t1 = portable_tanhf(tab, div_rn(g, beta));
  precise float t2 = t1 * beta;
  precise float t3 = t2 * sigmoid_f(tab, g);
  precise float t4 = portable_tanhf(tab, div_rn(u, beta_lin));
  precise float t5 = t4 * beta_lin;
  precise float r = t3 * t5;
  return r;
}

// The linear index of this workgroup over a dispatch of (x, y, 1) groups
// (the backend splits a count over 65,535 into x times y).
uint group_index() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }
