/* Bridge for a gap of Wine 8.0, for the Windows lane's prefix only (never the bundle).
 *
 * Gap: Wine 8.0's ucrtbase.dll exports the C99 complex functions (crealf, cabsf, cexp,
 * csqrt, cpow ...) as stubs that abort when called; numpy calls them at import.
 * Bridge: a native ucrtbase.dll that forwards every export to Wine's own ucrtbase (copied
 * beside it as wine_ucrtbase.dll; the .def is made from its export table by lane.py) and
 * implements these functions itself, with mingw-w64's complex maths.
 * Drop it when the lane reports that Wine's ucrtbase implements crealf.
 *
 * The Universal CRT passes complex numbers as structs (_Dcomplex, _Fcomplex, _Lcomplex,
 * complex.h of the Windows SDK), not as C99 _Complex: _Fcomplex (8 bytes) travels in a
 * register, _Dcomplex (16 bytes) by reference and is returned through a hidden pointer; GCC
 * does the same for these structs on x86_64-w64-mingw32. MSVC's long double is a double, so
 * the "l" functions take and return doubles.
 */
#include <complex.h>

typedef struct { double v[2]; } dcomplex;
typedef struct { float v[2]; } fcomplex;

static inline double _Complex D(dcomplex z) { return __builtin_complex(z.v[0], z.v[1]); }
static inline float _Complex F(fcomplex z) { return __builtin_complex(z.v[0], z.v[1]); }
static inline dcomplex Dr(double _Complex z) { dcomplex r = {{creal(z), cimag(z)}}; return r; }
static inline fcomplex Fr(float _Complex z) { fcomplex r = {{crealf(z), cimagf(z)}}; return r; }

/* complex -> complex: f(z), f##f(z), f##l(z) */
#define TO_COMPLEX(fn) \
    dcomplex b_##fn(dcomplex z) { return Dr(fn(D(z))); } \
    fcomplex b_##fn##f(fcomplex z) { return Fr(fn##f(F(z))); } \
    dcomplex b_##fn##l(dcomplex z) { return Dr(fn(D(z))); }
/* complex -> real */
#define TO_REAL(fn) \
    double b_##fn(dcomplex z) { return fn(D(z)); } \
    float b_##fn##f(fcomplex z) { return fn##f(F(z)); } \
    double b_##fn##l(dcomplex z) { return fn(D(z)); }

TO_COMPLEX(cacos) TO_COMPLEX(cacosh) TO_COMPLEX(casin) TO_COMPLEX(casinh)
TO_COMPLEX(catan) TO_COMPLEX(catanh) TO_COMPLEX(ccos) TO_COMPLEX(ccosh)
TO_COMPLEX(cexp) TO_COMPLEX(clog) TO_COMPLEX(conj) TO_COMPLEX(cproj)
TO_COMPLEX(csin) TO_COMPLEX(csinh) TO_COMPLEX(csqrt) TO_COMPLEX(ctan) TO_COMPLEX(ctanh)
TO_REAL(cabs) TO_REAL(carg) TO_REAL(cimag) TO_REAL(creal)

dcomplex b_cpow(dcomplex a, dcomplex b) { return Dr(cpow(D(a), D(b))); }
fcomplex b_cpowf(fcomplex a, fcomplex b) { return Fr(cpowf(F(a), F(b))); }
dcomplex b_cpowl(dcomplex a, dcomplex b) { return Dr(cpow(D(a), D(b))); }

/* the UCRT's own helpers: build a complex, multiply by a complex or a real */
fcomplex b__FCbuild(float re, float im) { fcomplex r = {{re, im}}; return r; }
dcomplex b__LCbuild(double re, double im) { dcomplex r = {{re, im}}; return r; }
dcomplex b__Cmulcc(dcomplex a, dcomplex b) { return Dr(D(a) * D(b)); }
dcomplex b__Cmulcr(dcomplex a, double b) { return Dr(D(a) * b); }
fcomplex b__FCmulcc(fcomplex a, fcomplex b) { return Fr(F(a) * F(b)); }
fcomplex b__FCmulcr(fcomplex a, float b) { return Fr(F(a) * b); }
dcomplex b__LCmulcc(dcomplex a, dcomplex b) { return Dr(D(a) * D(b)); }
dcomplex b__LCmulcr(dcomplex a, double b) { return Dr(D(a) * b); }
