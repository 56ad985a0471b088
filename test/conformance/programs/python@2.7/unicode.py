# -*- coding: utf-8 -*-
print("héllo wörld ✓ 日本")
