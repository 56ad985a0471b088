:- initialization(main).
main :- foo(.
