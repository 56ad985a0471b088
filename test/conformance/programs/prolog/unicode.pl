:- initialization(main, main).
main :- writeln("héllo wörld ✓ 日本").
