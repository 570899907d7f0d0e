"""The products Windows Installer has installed for an upgrade code, as Windows reports them
(msi.dll's MsiEnumRelatedProductsW and MsiGetProductInfoW).

    python.exe msi_products.py {UPGRADE-CODE}

Prints one JSON line: [{"code", "version", "name", "location"}].
"""

from __future__ import annotations

import ctypes
import json
import sys


def info(msi, product: str, prop: str) -> str:
    size = ctypes.c_uint32(1024)
    buf = ctypes.create_unicode_buffer(size.value)
    if msi.MsiGetProductInfoW(product, prop, buf, ctypes.byref(size)) != 0:
        return ""
    return buf.value


def main(upgrade_code: str) -> int:
    msi = ctypes.WinDLL("msi")
    products = []
    index = 0
    while True:
        code = ctypes.create_unicode_buffer(39)
        if msi.MsiEnumRelatedProductsW(upgrade_code, 0, index, code) != 0:
            break
        products.append(
            {
                "code": code.value,
                "version": info(msi, code.value, "VersionString"),
                "name": info(msi, code.value, "InstalledProductName"),
                "location": info(msi, code.value, "InstallLocation"),
            }
        )
        index += 1
    print(json.dumps(products), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
