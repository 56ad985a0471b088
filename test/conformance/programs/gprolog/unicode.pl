:- initialization(main).
main :- write('héllo wörld ✓ 日本'), nl.
