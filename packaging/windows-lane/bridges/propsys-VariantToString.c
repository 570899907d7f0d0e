/* Bridge for a gap of Wine 8.0, for the Windows lane's prefix only (never the bundle).
 *
 * Gap: propsys.VariantToString is a stub that aborts. CPython's _wmi module reads every
 * WMI value with it, and platform.machine(), platform.win32_ver() and platform.uname() ask
 * WMI first (Python 3.12+), so any of them ends the process.
 * Bridge: a native propsys.dll forwarding every export to Wine's own propsys (copied beside
 * it as wine_propsys.dll) and implementing VariantToString with oleaut32's
 * VariantChangeType, as Windows documents it: the value as text, truncated to the buffer
 * with STRSAFE_E_INSUFFICIENT_BUFFER.
 * Drop it when the lane reports that Wine's propsys implements VariantToString.
 */
#include <windows.h>
#include <oleauto.h>

HRESULT WINAPI b_VariantToString(const VARIANT *var, PWSTR out, UINT size)
{
    VARIANT text;
    HRESULT hr;
    UINT n;

    if (!out || !size) return E_INVALIDARG;
    out[0] = 0;
    VariantInit(&text);
    hr = VariantChangeType(&text, (VARIANT *)var, 0, VT_BSTR);
    if (FAILED(hr)) return hr;
    n = SysStringLen(text.bstrVal);
    if (n >= size)
    {
        n = size - 1;
        hr = HRESULT_FROM_WIN32(ERROR_INSUFFICIENT_BUFFER); /* STRSAFE_E_INSUFFICIENT_BUFFER */
    }
    memcpy(out, text.bstrVal, n * sizeof(WCHAR));
    out[n] = 0;
    VariantClear(&text);
    return hr;
}
