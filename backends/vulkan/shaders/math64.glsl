// Double-precision math for the WIDE shader variant: GLSL has no f64 exp, log or
// trigonometry, so these are written from range reduction plus series that are
// converged to below 1 ulp on the reduced ranges (about 1e-15 relative; pow, erf
// and huge trig arguments lose a few more digits).
const double kLn2Hi = 6.93147180369123816490e-01LF;
const double kLn2Lo = 1.90821492927058770002e-10LF;
const double kPi = 3.14159265358979311600e+00LF;
const double kPio2 = 1.57079632679489655800e+00LF;

bool signbit_d(double x) { return (unpackDouble2x32(x).y & 0x80000000u) != 0u; }
double copysign_d(double x, double s) {
  uvec2 v = unpackDouble2x32(x);
  v.y = (v.y & 0x7FFFFFFFu) | (unpackDouble2x32(s).y & 0x80000000u);
  return packDouble2x32(v);
}
double nan_d() { return packDouble2x32(uvec2(0u, 0x7FF80000u)); }
double inf_d() { return packDouble2x32(uvec2(0u, 0x7FF00000u)); }

// e^r - 1 for |r| <= 0.35 (Taylor to r^18).
double expm1_small(double r) {
  double p = 1.0LF / 6402373705728000.0LF;  // 1/18!
  p = p * r + 1.0LF / 355687428096000.0LF;
  p = p * r + 1.0LF / 20922789888000.0LF;
  p = p * r + 1.0LF / 1307674368000.0LF;
  p = p * r + 1.0LF / 87178291200.0LF;
  p = p * r + 1.0LF / 6227020800.0LF;
  p = p * r + 1.0LF / 479001600.0LF;
  p = p * r + 1.0LF / 39916800.0LF;
  p = p * r + 1.0LF / 3628800.0LF;
  p = p * r + 1.0LF / 362880.0LF;
  p = p * r + 1.0LF / 40320.0LF;
  p = p * r + 1.0LF / 5040.0LF;
  p = p * r + 1.0LF / 720.0LF;
  p = p * r + 1.0LF / 120.0LF;
  p = p * r + 1.0LF / 24.0LF;
  p = p * r + 1.0LF / 6.0LF;
  p = p * r + 0.5LF;
  return (p * r + 1.0LF) * r;
}

double exp_d(double x) {
  if (isnan(x)) return x;
  if (x > 709.782712893384LF) return inf_d();
  if (x < -745.2LF) return 0.0LF;
  double k = roundEven(x * 1.44269504088896338700LF);
  double r = (x - k * kLn2Hi) - k * kLn2Lo;
  double p = expm1_small(r) + 1.0LF;
  int ki = int(k);
  int k1 = ki / 2;
  return ldexp(ldexp(p, k1), ki - k1);
}

double expm1_d(double x) {
  if (abs(x) <= 0.35LF) return expm1_small(x);
  return exp_d(x) - 1.0LF;
}

double log_d(double x) {
  if (isnan(x) || x < 0.0LF) return nan_d();
  if (x == 0.0LF) return -inf_d();
  if (isinf(x)) return x;
  int e;
  double m = frexp(x, e);
  if (m < 0.70710678118654752440LF) { m *= 2.0LF; e -= 1; }
  double s = (m - 1.0LF) / (m + 1.0LF);
  double s2 = s * s;
  double p = 1.0LF / 27.0LF;
  for (int k = 25; k >= 1; k -= 2) p = p * s2 + 1.0LF / double(k);
  double lm = 2.0LF * s * p;
  double de = double(e);
  return de * kLn2Hi + (lm + de * kLn2Lo);
}

double log1p_d(double x) {
  if (abs(x) < 1e-2LF) {  // the series: log_d(1 + x) loses digits of a tiny x
    double p = -0.1LF;
    for (int k = 9; k >= 1; --k) p = p * x + ((k & 1) != 0 ? 1.0LF : -1.0LF) / double(k);
    return x * p;
  }
  double u = 1.0LF + x;
  if (u == 1.0LF) return x;
  if (isinf(u)) return log_d(u);
  return log_d(u) * (x / (u - 1.0LF));
}

// sin and cos of |r| <= pi/4 (Taylor to r^25 / r^24).
double sin_poly(double r) {
  double r2 = r * r, p = 0.0LF, f = 1.0LF;
  // coefficients (-1)^n / (2n+1)! for n = 12 .. 0, Horner
  double c[13];
  c[0] = 1.0LF;
  for (int n = 1; n < 13; ++n) { f *= double(2 * n) * double(2 * n + 1); c[n] = ((n & 1) != 0 ? -1.0LF : 1.0LF) / f; }
  for (int n = 12; n >= 0; --n) p = p * r2 + c[n];
  return p * r;
}
double cos_poly(double r) {
  double r2 = r * r, p = 0.0LF, f = 1.0LF;
  double c[13];
  c[0] = 1.0LF;
  for (int n = 1; n < 13; ++n) { f *= double(2 * n - 1) * double(2 * n); c[n] = ((n & 1) != 0 ? -1.0LF : 1.0LF) / f; }
  for (int n = 12; n >= 0; --n) p = p * r2 + c[n];
  return p;
}
// x = k * pi/2 + r with |r| <= pi/4 (three-part Cody-Waite); returns r, q = k mod 4.
double reduce_pio2(double x, out int q) {
  double k = roundEven(x * 6.36619772367581382433e-01LF);
  double r = ((x - k * 1.57079632673412561417e+00LF) - k * 6.07710050630396597660e-11LF) - k * 2.02226624871116645580e-21LF;
  double k4 = k - 4.0LF * floor(k * 0.25LF);
  q = int(k4);
  return r;
}
double sin_d(double x) {
  if (isnan(x) || isinf(x)) return nan_d();
  int q;
  double r = reduce_pio2(x, q);
  if (q == 0) return sin_poly(r);
  if (q == 1) return cos_poly(r);
  if (q == 2) return -sin_poly(r);
  return -cos_poly(r);
}
double cos_d(double x) {
  if (isnan(x) || isinf(x)) return nan_d();
  int q;
  double r = reduce_pio2(x, q);
  if (q == 0) return cos_poly(r);
  if (q == 1) return -sin_poly(r);
  if (q == 2) return -cos_poly(r);
  return sin_poly(r);
}
double tan_d(double x) { return sin_d(x) / cos_d(x); }

double atan_d(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  bool inv = a > 1.0LF;
  if (inv) a = 1.0LF / a;
  a = a / (1.0LF + sqrt(1.0LF + a * a));  // atan(a) = 2 atan(a / (1 + sqrt(1 + a^2)))
  a = a / (1.0LF + sqrt(1.0LF + a * a));  // now a <= tan(pi/16)
  double a2 = a * a, p = 0.0LF;
  for (int n = 15; n >= 0; --n) p = p * a2 + ((n & 1) != 0 ? -1.0LF : 1.0LF) / double(2 * n + 1);
  double r = 4.0LF * a * p;
  if (inv) r = kPio2 - r;
  return x < 0.0LF ? -r : r;
}
double atan2_d(double y, double x) {
  if (isnan(x) || isnan(y)) return nan_d();
  if (isinf(x) && isinf(y)) return copysign_d(x > 0.0LF ? kPio2 * 0.5LF : kPio2 * 1.5LF, y);
  if (x == 0.0LF) {
    if (y == 0.0LF) return signbit_d(x) ? copysign_d(kPi, y) : y;
    return copysign_d(kPio2, y);
  }
  if (isinf(x)) return x > 0.0LF ? copysign_d(0.0LF, y) : copysign_d(kPi, y);
  if (isinf(y)) return copysign_d(kPio2, y);
  double t = atan_d(y / x);
  if (x > 0.0LF) return t;
  return signbit_d(y) ? t - kPi : t + kPi;
}

double erf_d(double x) {
  if (isnan(x)) return x;
  double z = abs(x);
  double r;
  if (z < 2.5LF) {
    // erf z = 2/sqrt(pi) sum (-1)^n z^(2n+1) / (n! (2n+1))
    double z2 = z * z, term = z, sum = z;
    for (int n = 1; n < 80; ++n) {
      term *= -z2 / double(n);
      double t = term / double(2 * n + 1);
      sum += t;
      if (abs(t) < 1e-18LF * abs(sum)) break;
    }
    r = 1.12837916709551257390LF * sum;
  } else if (z < 6.0LF) {
    // erfc z = exp(-z^2) / sqrt(pi) / (z + 1/2 / (z + 1 / (z + 3/2 / (z + ...))))
    double f = z;
    for (int k = 80; k >= 1; --k) f = z + (double(k) * 0.5LF) / f;
    r = 1.0LF - exp_d(-z * z) * 0.56418958354775628695LF / f;
  } else {
    r = 1.0LF;
  }
  return x < 0.0LF ? -r : r;
}
