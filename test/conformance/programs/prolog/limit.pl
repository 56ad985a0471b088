:- initialization(main, main).
main :- loop.
loop :- loop.
