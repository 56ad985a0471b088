<?php
echo "héllo wörld ✓ 日本\n";
