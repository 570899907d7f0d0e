/* Bridge for a gap of Wine 8.0, for the Windows lane's prefix only (never the bundle).
 *
 * Gap: Wine 8.0 has no icuuc.dll, the ICU that Windows 10 (1903+) ships in System32 and
 * that PySide6's Qt6Core.dll links for QStringConverter's extra codecs: QtCore fails to
 * load ("DLL load failed while importing QtCore").
 * Bridge: an icuuc.dll with the 20 converter functions Qt6Core imports and no converters:
 * ucnv_open fails (U_FILE_ACCESS_ERROR), as for a codec name ICU does not know, so Qt keeps
 * to its own UTF-8, UTF-16, UTF-32 and Latin-1 codecs (all Cantor uses).
 * Drop it when the lane reports that Wine ships icuuc.dll.
 */
#include <stdint.h>
#include <stddef.h>

typedef int UErrorCode;
enum { U_FILE_ACCESS_ERROR = 4, U_UNSUPPORTED_ERROR = 16 };

static void fail(UErrorCode *err, UErrorCode code)
{
    if (err && *err <= 0) *err = code; /* ICU keeps the first failure */
}

void *ucnv_open(const char *name, UErrorCode *err) { (void)name; fail(err, U_FILE_ACCESS_ERROR); return NULL; }
void ucnv_close(void *cnv) { (void)cnv; }
void ucnv_reset(void *cnv) { (void)cnv; }
int32_t ucnv_countAvailable(void) { return 0; }
const char *ucnv_getAvailableName(int32_t n) { (void)n; return NULL; }
const char *ucnv_getStandardName(const char *name, const char *standard, UErrorCode *err)
{ (void)name; (void)standard; fail(err, U_UNSUPPORTED_ERROR); return NULL; }
const char *ucnv_getName(const void *cnv, UErrorCode *err) { (void)cnv; fail(err, U_UNSUPPORTED_ERROR); return NULL; }
int8_t ucnv_getMaxCharSize(const void *cnv) { (void)cnv; return 1; }
int32_t ucnv_toUCountPending(const void *cnv, UErrorCode *err) { (void)cnv; fail(err, U_UNSUPPORTED_ERROR); return 0; }
int32_t ucnv_fromUCountPending(const void *cnv, UErrorCode *err) { (void)cnv; fail(err, U_UNSUPPORTED_ERROR); return 0; }
void ucnv_getToUCallBack(const void *cnv, void **action, const void **context)
{ (void)cnv; if (action) *action = NULL; if (context) *context = NULL; }
void ucnv_getFromUCallBack(const void *cnv, void **action, const void **context)
{ (void)cnv; if (action) *action = NULL; if (context) *context = NULL; }
void ucnv_setToUCallBack(void *cnv, void *action, const void *context, void **old_action,
                         const void **old_context, UErrorCode *err)
{ (void)cnv; (void)action; (void)context; if (old_action) *old_action = NULL; if (old_context) *old_context = NULL; fail(err, U_UNSUPPORTED_ERROR); }
void ucnv_setFromUCallBack(void *cnv, void *action, const void *context, void **old_action,
                           const void **old_context, UErrorCode *err)
{ (void)cnv; (void)action; (void)context; if (old_action) *old_action = NULL; if (old_context) *old_context = NULL; fail(err, U_UNSUPPORTED_ERROR); }
void ucnv_toUnicode(void *cnv, void **target, const void *target_limit, const char **source,
                    const char *source_limit, int32_t *offsets, int8_t flush, UErrorCode *err)
{ (void)cnv; (void)target; (void)target_limit; (void)source; (void)source_limit; (void)offsets; (void)flush; fail(err, U_UNSUPPORTED_ERROR); }
void ucnv_fromUnicode(void *cnv, char **target, const char *target_limit, const void **source,
                      const void *source_limit, int32_t *offsets, int8_t flush, UErrorCode *err)
{ (void)cnv; (void)target; (void)target_limit; (void)source; (void)source_limit; (void)offsets; (void)flush; fail(err, U_UNSUPPORTED_ERROR); }
void ucnv_cbToUWriteUChars(void *args, const void *source, int32_t length, int32_t offset, UErrorCode *err)
{ (void)args; (void)source; (void)length; (void)offset; fail(err, U_UNSUPPORTED_ERROR); }
void ucnv_cbFromUWriteUChars(void *args, const void **source, const void *limit, int32_t offset, UErrorCode *err)
{ (void)args; (void)source; (void)limit; (void)offset; fail(err, U_UNSUPPORTED_ERROR); }
void UCNV_TO_U_CALLBACK_SUBSTITUTE(const void *context, void *args, const char *units, int32_t length,
                                   int reason, UErrorCode *err)
{ (void)context; (void)args; (void)units; (void)length; (void)reason; fail(err, U_UNSUPPORTED_ERROR); }
void UCNV_FROM_U_CALLBACK_SUBSTITUTE(const void *context, void *args, const void *units, int32_t length,
                                     int32_t code_point, int reason, UErrorCode *err)
{ (void)context; (void)args; (void)units; (void)length; (void)code_point; (void)reason; fail(err, U_UNSUPPORTED_ERROR); }
