:- initialization(main).
main :- argument_list(Args), print_all(Args).
print_all([]).
print_all([A|As]) :- write(A), nl, print_all(As).
