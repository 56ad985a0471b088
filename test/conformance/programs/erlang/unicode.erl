main(_) -> io:format("~ts~n", ["héllo wörld ✓ 日本"]).
