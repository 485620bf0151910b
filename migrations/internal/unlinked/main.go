// Command unlinked calls migrations.Up without linking a driver package;
// TestDriverNotLinked runs it and reads what it prints.
package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/concurkit/concurkit/migrations"
)

func main() {
	for _, d := range []migrations.Dialect{migrations.Postgres, migrations.MySQL} {
		err := migrations.Up(context.Background(), d, "postgres://u@127.0.0.1:1/db")
		if d == migrations.MySQL {
			err = migrations.Up(context.Background(), d, "u@tcp(127.0.0.1:1)/db")
		}
		fmt.Println(errors.Is(err, migrations.ErrDriverNotLinked), err)
	}
}
