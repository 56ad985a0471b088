SELECT 'héllo wörld ✓ 日本';
