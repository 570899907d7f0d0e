/* Bridge for a gap of Wine 8.0, for the Windows lane's prefix only (never the bundle).
 *
 * Gap: mscms.WcsCreateIccProfile is a stub that aborts; Qt's windows platform plugin
 * (qwindows.dll) calls it for the screen's colour profile when the first window opens.
 * Bridge: a native mscms.dll forwarding every export to Wine's own mscms (copied beside it
 * as wine_mscms.dll) whose WcsCreateIccProfile fails cleanly (no profile, as on a display
 * without one): Qt then uses sRGB.
 * Drop it when the lane reports that Wine's mscms implements WcsCreateIccProfile.
 */
#include <windows.h>

HANDLE WINAPI b_WcsCreateIccProfile(HANDLE profile, DWORD options)
{
    (void)profile;
    (void)options;
    SetLastError(ERROR_NOT_SUPPORTED);
    return NULL;
}
