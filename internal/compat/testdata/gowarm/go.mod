module example.com/warm

go 1.26
