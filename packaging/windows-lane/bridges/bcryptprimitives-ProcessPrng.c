/* Bridge for a gap of Wine 8.0, for the Windows lane's prefix only (never the bundle).
 *
 * Gap: Wine 8.0 has no bcryptprimitives.dll. Rust's standard library (1.78+) takes its
 * random numbers from bcryptprimitives.ProcessPrng, so pydantic-core and cryptography (both
 * Rust) fail to load: "DLL load failed ... Module not found".
 * Bridge: a bcryptprimitives.dll with ProcessPrng on advapi32's RtlGenRandom
 * (SystemFunction036), Wine's system random source. Windows documents ProcessPrng as
 * always succeeding; so does this, for any length.
 * Drop it when the lane reports that Wine ships bcryptprimitives.dll.
 */
#include <windows.h>
#include <ntsecapi.h>

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T size)
{
    while (size)
    {
        ULONG n = size > 0x10000000 ? 0x10000000 : (ULONG)size;
        if (!RtlGenRandom(data, n)) return FALSE;
        data += n;
        size -= n;
    }
    return TRUE;
}
