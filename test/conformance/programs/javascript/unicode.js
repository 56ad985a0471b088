console.log("héllo wörld ✓ 日本");
